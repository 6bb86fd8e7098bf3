package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/activity"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Reconciliation categories: every claim and every transfer a run looks at
// ends in exactly one.
const (
	// ReconcileMatched: one transfer for the claim, the one the step log
	// records, paying the recorded payout in the claim's currency.
	ReconcileMatched = "matched"
	// ReconcileOrphaned: a transfer whose claim has no completed payment in
	// the step log (not closed as paid in the store, or not registered at
	// all, or the transfer names no claim): money moved that nothing
	// recorded. This is the crash window the payment step guards against.
	ReconcileOrphaned = "orphaned"
	// ReconcileDuplicate: more than one transfer for a claim paid once.
	ReconcileDuplicate = "duplicate"
	// ReconcileMissing: the step log says paid with a transfer the provider
	// does not have (or with no transfer ID at all).
	ReconcileMissing = "missing"
	// ReconcileAmountMismatch: one transfer, the recorded one, paying an
	// amount (or currency) other than the recorded payout.
	ReconcileAmountMismatch = "amount_mismatch"
	// ReconcileInFlight marks a report's InFlight entries: not a category,
	// not counted, judged by the next run.
	ReconcileInFlight = "in_flight"
)

// ReconcileCategories lists the categories, matched first, then the
// discrepancies from the most urgent: the order of reports and tables.
var ReconcileCategories = []string{ReconcileMatched, ReconcileOrphaned, ReconcileDuplicate, ReconcileMissing, ReconcileAmountMismatch}

// Reconciliation defaults.
const (
	// DefaultReconcileMaxEntries bounds the entries a report carries (they
	// travel in the workflow's result and the stored report); counts are
	// always complete.
	DefaultReconcileMaxEntries = 1000
	// DefaultInFlightGrace is how long a transfer whose claim is still open
	// in the store counts as in flight (paid by step 6, not yet closed by
	// step 8) rather than orphaned. The next scheduled run, whose window
	// overlaps this one, classifies it.
	DefaultInFlightGrace = 5 * time.Minute
	// maxTransfersPerEntry bounds the transfer IDs listed in one entry.
	maxTransfersPerEntry = 20
)

// ReconcilePaymentsInput is ReconcilePayments' input; the workflow fills in
// every field, so a retried attempt reconciles exactly the same window.
type ReconcilePaymentsInput struct {
	// Key identifies the run's stored report: "<workflowID>:reconcile".
	Key        claim.IdempotencyKey `json:"key"`
	WorkflowID string               `json:"workflow_id"`
	Started    time.Time            `json:"started"`
	Since      time.Time            `json:"since"`
	Until      time.Time            `json:"until"`
	// MaxEntries bounds the report's entries (0: DefaultReconcileMaxEntries).
	MaxEntries int `json:"max_entries,omitempty"`
	// InFlightGrace (0: DefaultInFlightGrace; negative: none) spares
	// transfers of claims still open in the store that are younger than it.
	InFlightGrace time.Duration `json:"in_flight_grace,omitempty"`
}

// ReconcileEntry is one claim (or one claimless transfer) and its category.
type ReconcileEntry struct {
	ClaimID  string `json:"claim_id"`
	Category string `json:"category"`
	// TransferIDs and AmountsMinor are the provider's transfers for the
	// claim, newest first (at most 20; Detail says how many more).
	TransferIDs  []string `json:"transfer_ids,omitempty"`
	AmountsMinor []int64  `json:"amounts_minor,omitempty"`
	Currency     string   `json:"currency,omitempty"`
	// ClaimStatus, LoggedTransferID and PayoutMinor are what the step log
	// (the claims store) holds; ClaimStatus is empty for a claim it does not
	// know.
	ClaimStatus      string `json:"claim_status,omitempty"`
	LoggedTransferID string `json:"logged_transfer_id,omitempty"`
	PayoutMinor      int64  `json:"payout_minor,omitempty"`
	Detail           string `json:"detail"`
}

// ReconcileReport is the outcome of one reconciliation run.
type ReconcileReport struct {
	ID         string    `json:"id"`
	WorkflowID string    `json:"workflow_id"`
	Started    time.Time `json:"started"`
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	// Counts has every category of ReconcileCategories, zeros included.
	Counts map[string]int `json:"counts"`
	// Unmatched is the number of entries in a category other than matched.
	Unmatched        int `json:"unmatched"`
	TransfersScanned int `json:"transfers_scanned"`
	ClaimsChecked    int `json:"claims_checked"`
	// Entries are the discrepancies (never the matched), most urgent
	// category first, then by claim ID; at most MaxEntries, Truncated if
	// there were more.
	Entries   []ReconcileEntry `json:"entries,omitempty"`
	Truncated bool             `json:"truncated,omitempty"`
	// InFlight are transfers of claims still open in the store, younger than
	// the grace: neither matched nor discrepancies yet. They are in the next
	// scheduled run's window.
	InFlight []ReconcileEntry `json:"in_flight,omitempty"`
	// Replayed means this attempt found the report already stored under the
	// key (an earlier attempt stored it) and returned that one.
	Replayed bool `json:"replayed,omitempty"`
}

// ReconcileProgress is what ReconcilePayments reports in its heartbeats
// (`temporal workflow describe` shows it on the pending activity). A retried
// attempt starts over: the scan is a read, and resuming it would mean
// carrying every transfer seen so far in the heartbeat.
type ReconcileProgress struct {
	Phase          string `json:"phase"`
	Transfers      int    `json:"transfers"`
	LastTransferID string `json:"last_transfer_id,omitempty"`
	// Lookups counts recorded transfers fetched by ID (made outside the
	// window).
	Lookups int `json:"lookups"`
}

// transferSeen is a provider transfer as reconciliation needs it.
type transferSeen struct {
	ID       string
	Amount   int64
	Currency string
	Created  time.Time
	ClaimID  string // "" when it names no claim
}

func seenTransfer(tr *stripe.Transfer) transferSeen {
	return transferSeen{ID: tr.ID, Amount: tr.Amount, Currency: strings.ToLower(string(tr.Currency)),
		Created: time.Unix(tr.Created, 0).UTC(), ClaimID: transferClaim(tr)}
}

// transferClaim says which claim a transfer pays: its transfer_group (step
// 6 sets it to the claim ID), else its workflow_id metadata (the workflow ID
// is the claim ID), else the claim part of its idempotency_key metadata.
func transferClaim(tr *stripe.Transfer) string {
	if tr.TransferGroup != "" {
		return tr.TransferGroup
	}
	if id := tr.Metadata["workflow_id"]; id != "" {
		return id
	}
	if k := tr.Metadata["idempotency_key"]; k != "" {
		if i := strings.LastIndex(k, ":step"); i > 0 {
			return k[:i]
		}
	}
	return ""
}

// ReconcilePayments compares the payment provider with the step log for one
// window and stores the report under in.Key, once.
//
// The provider side is every transfer created in [Since, Until], listed with
// auto-pagination. The platform account is dedicated to claims, so every
// transfer counts: step 6's carry the claim as transfer_group and in their
// metadata (workflow_id, step=6, idempotency_key); one that names no claim at
// all is an orphan without a claim ID.
//
// The step-log side is the claims store: claims closed as paid in the window,
// plus every claim a listed transfer names, whatever its status or close
// time. The store is the log of record here, not Temporal: step 8 writes the
// outcome, the transfer ID and the payout in one upsert, right after the
// payment, whereas ClaimStatus=paid is upserted only when the run completes
// (after step 9), visibility is eventually consistent, and the workflow's
// result would mean reading one history per claim. What Temporal alone knows
// (a run paid by step 6 and not yet closed by step 8) is allowed for by the
// in-flight grace, and a run dead-lettered after its payment shows as an
// orphan, which is what an operator must look at.
//
// Windows are cut on two clocks (the provider's created, the store's close
// time), so each side is completed from the other: a paid claim whose
// recorded transfer was created outside the window is fetched by ID before
// it is called missing, and a transfer in the window is judged against its
// claim's record wherever that record's close time falls.
func (a *Activities) ReconcilePayments(ctx context.Context, in ReconcilePaymentsInput) (ReconcileReport, error) {
	if err := a.mayReconcile(ctx, in); err != nil {
		return ReconcileReport{}, err
	}
	if stored, err := a.Store.GetReconciliation(ctx, string(in.Key)); err == nil {
		return replayedReport(ctx, stored)
	} else if !errors.Is(err, store.ErrNotFound) {
		return ReconcileReport{}, err
	}
	r := &reconciliation{a: a, in: in, progress: ReconcileProgress{Phase: "transfers"}}
	if err := r.listTransfers(ctx); err != nil {
		return ReconcileReport{}, err
	}
	if err := r.readStepLog(ctx); err != nil {
		return ReconcileReport{}, err
	}
	if err := r.fetchRecorded(ctx); err != nil {
		return ReconcileReport{}, err
	}
	// A claim whose record names a transfer the provider does not hold for
	// it: its run took a payment result no payment made (a forged
	// completion, dead-lettered by step 7's check). Not paid in the store
	// and named by no transfer, it is in none of the above.
	unmade, err := a.unmadeTransfers(ctx, in, r.ids)
	if err != nil {
		return ReconcileReport{}, err
	}
	rep := r.report(ctx, unmade)
	// Store it once under the key; a concurrent or earlier attempt's report
	// wins.
	stored, replayed, err := a.saveReport(ctx, rep)
	if err != nil {
		return ReconcileReport{}, err
	}
	if replayed {
		return replayedReport(ctx, stored)
	}
	announce(ctx, rep)
	return rep, nil
}

// mayReconcile checks the input, and that the caller is this worker's own
// reconciliation workflow: what moved to whom is the insurer's.
func (a *Activities) mayReconcile(ctx context.Context, in ReconcilePaymentsInput) error {
	if err := requireKey(in.Key); err != nil {
		return err
	}
	if in.Since.IsZero() || in.Until.IsZero() || !in.Since.Before(in.Until) {
		return invalid("reconciliation window [%s, %s] is empty", in.Since, in.Until)
	}
	c, _ := a.caller(ctx)
	if ours, err := a.ownRun(ctx, c, a.Runs.ReconcileWorkflow); err != nil {
		return err
	} else if !ours || c.WorkflowID != in.WorkflowID {
		return a.refuse(ctx, c, "", "foreign-run", ErrForeignRun,
			"ReconcilePayments runs only for this worker's own reconciliation workflow")
	}
	return nil
}

// reconciliation is one attempt's working state, filled in phase by phase:
// the provider's transfers, the step log's records, and the claims judged.
type reconciliation struct {
	a        *Activities
	in       ReconcilePaymentsInput
	progress ReconcileProgress
	// byClaim are the provider's transfers by the claim each names;
	// claimless those that name none.
	byClaim   map[string][]transferSeen
	claimless []transferSeen
	// states are the step log's records; ids every claim judged, sorted.
	states map[string]store.ClaimState
	ids    []string
	// elsewhere maps a recorded transfer ID to the claim it actually names.
	elsewhere map[string]string
}

func (r *reconciliation) beat(ctx context.Context) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, r.progress)
	}
}

// listTransfers reads the provider: every transfer in the window, grouped
// by claim.
func (r *reconciliation) listTransfers(ctx context.Context) error {
	r.byClaim = map[string][]transferSeen{}
	params := &stripe.TransferListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: r.in.Since.Unix(), LesserThanOrEqual: r.in.Until.Unix()}}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	it := r.a.Stripe.Transfers.List(params)
	for it.Next() {
		t := seenTransfer(it.Transfer())
		if t.ClaimID == "" {
			r.claimless = append(r.claimless, t)
		} else {
			r.byClaim[t.ClaimID] = append(r.byClaim[t.ClaimID], t)
		}
		r.progress.Transfers++
		r.progress.LastTransferID = t.ID
		if r.progress.Transfers%100 == 0 {
			r.beat(ctx)
		}
	}
	if err := it.Err(); err != nil {
		return classifyStripe(err)
	}
	return nil
}

// readStepLog reads the step log: claims paid in the window, and every
// claim named by a transfer.
func (r *reconciliation) readStepLog(ctx context.Context) error {
	r.progress.Phase = "claims"
	r.beat(ctx)
	paid, err := r.a.Store.PaidClaims(ctx, r.in.Since, r.in.Until)
	if err != nil {
		return err
	}
	r.states = make(map[string]store.ClaimState, len(paid)+len(r.byClaim))
	for _, c := range paid {
		r.states[c.ID] = c
	}
	var named []string
	for id := range r.byClaim {
		if _, ok := r.states[id]; !ok {
			named = append(named, id)
		}
	}
	slices.Sort(named)
	more, err := r.a.Store.ClaimStates(ctx, named)
	if err != nil {
		return err
	}
	for id, c := range more {
		r.states[id] = c
	}
	r.ids = make([]string, 0, len(r.states)+len(r.byClaim))
	for id := range r.states {
		r.ids = append(r.ids, id)
	}
	for id := range r.byClaim {
		if _, ok := r.states[id]; !ok {
			r.ids = append(r.ids, id) // not registered in the store
		}
	}
	slices.Sort(r.ids)
	return nil
}

// fetchRecorded completes the provider side: a paid claim's recorded
// transfer made outside the window is fetched by ID.
func (r *reconciliation) fetchRecorded(ctx context.Context) error {
	r.progress.Phase = "lookups"
	r.elsewhere = map[string]string{}
	for _, id := range r.ids {
		st, ok := r.states[id]
		if !ok || !st.Paid() || st.TransferID == "" || slices.ContainsFunc(r.byClaim[id], func(t transferSeen) bool { return t.ID == st.TransferID }) {
			continue
		}
		tr, found, err := r.a.getTransfer(ctx, st.TransferID)
		if err != nil {
			return err
		}
		r.progress.Lookups++
		if r.progress.Lookups%50 == 0 {
			r.beat(ctx)
		}
		if !found {
			continue
		}
		t := seenTransfer(tr)
		if t.ClaimID != id && t.ClaimID != "" {
			r.elsewhere[t.ID] = t.ClaimID
			continue
		}
		r.byClaim[id] = append(r.byClaim[id], t)
	}
	return nil
}

// report classifies every claim judged, the unmade transfers and the
// claimless ones, into the report: discrepancies most urgent first, at
// most in.MaxEntries of each list.
func (r *reconciliation) report(ctx context.Context, unmade []ReconcileEntry) ReconcileReport {
	r.progress.Phase = "classify"
	r.beat(ctx)
	in := r.in
	rep := ReconcileReport{ID: string(in.Key), WorkflowID: in.WorkflowID, Started: in.Started.UTC(),
		Since: in.Since.UTC(), Until: in.Until.UTC(), Counts: map[string]int{}, ClaimsChecked: len(r.ids)}
	for _, c := range ReconcileCategories {
		rep.Counts[c] = 0
	}
	entries, inFlight := r.classifyClaims(rep.Counts)
	for _, e := range unmade {
		entries = append(entries, e)
		rep.Counts[e.Category]++
		rep.ClaimsChecked++
	}
	for _, t := range r.claimless {
		e := entry("", ReconcileOrphaned, []transferSeen{t}, store.ClaimState{})
		e.Detail = "the transfer names no claim (no transfer_group, workflow_id or idempotency_key metadata)"
		entries = append(entries, e)
		rep.Counts[ReconcileOrphaned]++
	}
	rep.TransfersScanned = r.progress.Transfers
	rank := func(c string) int { return slices.Index(ReconcileCategories, c) }
	slices.SortStableFunc(entries, func(x, y ReconcileEntry) int {
		if d := rank(x.Category) - rank(y.Category); d != 0 {
			return d
		}
		return strings.Compare(x.ClaimID, y.ClaimID)
	})
	rep.Unmatched = len(entries)
	limit := in.MaxEntries
	if limit <= 0 {
		limit = DefaultReconcileMaxEntries
	}
	if len(entries) > limit {
		entries, rep.Truncated = entries[:limit], true
	}
	if len(inFlight) > limit {
		inFlight, rep.Truncated = inFlight[:limit], true
	}
	rep.Entries, rep.InFlight = entries, inFlight
	return rep
}

// classifyClaims puts each claim judged in its category, counting it:
// the discrepancies are entries, the claims still in flight inFlight
// (not counted).
func (r *reconciliation) classifyClaims(counts map[string]int) (entries, inFlight []ReconcileEntry) {
	grace := r.in.InFlightGrace
	if grace == 0 {
		grace = DefaultInFlightGrace
	}
	now := time.Now()
	for _, id := range r.ids {
		st, known := r.states[id]
		trs := r.byClaim[id]
		slices.SortFunc(trs, func(x, y transferSeen) int {
			if c := y.Created.Compare(x.Created); c != 0 {
				return c
			}
			return strings.Compare(x.ID, y.ID)
		})
		young := grace > 0 && len(trs) > 0 && now.Sub(trs[len(trs)-1].Created) < grace
		e, pending := classify(id, st, known, trs, r.elsewhere, young)
		switch {
		case pending:
			inFlight = append(inFlight, e)
			continue
		case e.Category != ReconcileMatched:
			entries = append(entries, e)
		}
		counts[e.Category]++
	}
	return entries, inFlight
}

// saveReport stores the report under its key, once: replayed says an
// earlier or concurrent attempt's is there, and stored is that one.
func (a *Activities) saveReport(ctx context.Context, rep ReconcileReport) (stored store.Reconciliation, replayed bool, err error) {
	counts, err := json.Marshal(rep.Counts)
	if err != nil {
		return store.Reconciliation{}, false, err
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return store.Reconciliation{}, false, err
	}
	return a.Store.SaveReconciliation(ctx, store.Reconciliation{ID: rep.ID, Started: rep.Started,
		Since: rep.Since, Until: rep.Until, Counts: counts, Report: body})
}

// announce counts a new report's discrepancies in the metrics and logs
// them: an alert when anything does not reconcile.
func announce(ctx context.Context, rep ReconcileReport) {
	if activity.IsActivity(ctx) {
		h := activity.GetMetricsHandler(ctx)
		for _, c := range ReconcileCategories[1:] {
			h.WithTags(map[string]string{"category": c}).Counter(metrics.ReconciliationDiscrepancies).Inc(int64(rep.Counts[c]))
		}
		h.Gauge(metrics.ReconciliationLastRunUnmatched).Update(float64(rep.Unmatched))
	}
	log := logger(ctx)
	if rep.Unmatched > 0 {
		log.Error("ALERT: payments do not reconcile with the step log", "alert", "reconciliation",
			"unmatched", rep.Unmatched, "counts", rep.Counts, "since", rep.Since, "until", rep.Until, "report", rep.ID)
		for _, e := range rep.Entries {
			log.Warn("reconciliation discrepancy", "claim", e.ClaimID, "category", e.Category, "transfers", e.TransferIDs, "detail", e.Detail)
		}
	} else {
		log.Info("payments reconcile with the step log", "counts", rep.Counts, "in_flight", len(rep.InFlight),
			"since", rep.Since, "until", rep.Until, "report", rep.ID)
	}
}

// classify puts one claim, with the provider's transfers for it (newest
// first) and the store's record, in its category. pending reports a claim
// still open in the store whose transfers are all younger than the grace:
// paid by step 6 and not yet closed by step 8, most likely.
func classify(id string, st store.ClaimState, known bool, trs []transferSeen, elsewhere map[string]string, young bool) (e ReconcileEntry, pending bool) {
	cur := st.Currency
	if !st.Paid() {
		e = entry(id, ReconcileOrphaned, trs, st)
		switch {
		case !known:
			e.Detail = "the claim is not in the claims store"
		case st.Closed():
			e.Detail = fmt.Sprintf("the claim was closed %s, not paid", st.Status)
		default:
			e.Detail = fmt.Sprintf("the claim is %s in the store: no completed payment (step 8 never recorded one)", st.Status)
			if young && st.Status == store.StatusOpen {
				e.Category = ReconcileInFlight
				e.Detail = "the claim is still open and the transfer is recent: step 8 has probably not run yet"
				return e, true
			}
		}
		if len(trs) > 1 {
			e.Detail += fmt.Sprintf("; %d transfers for it, %s in all", len(trs), total(trs))
		}
		return e, false
	}
	logged := st.TransferID
	if logged == "" {
		e = entry(id, ReconcileMissing, trs, st)
		e.Detail = "the store records the claim paid without a transfer ID"
		if len(trs) > 0 {
			e.Detail += fmt.Sprintf("; the provider holds %s for it", ids(trs))
		}
		return e, false
	}
	if !slices.ContainsFunc(trs, func(t transferSeen) bool { return t.ID == logged }) {
		e = entry(id, ReconcileMissing, trs, st)
		if other, ok := elsewhere[logged]; ok {
			e.Detail = fmt.Sprintf("the store records transfer %s, which the provider holds for claim %s", logged, other)
		} else {
			e.Detail = fmt.Sprintf("the store records transfer %s, which the provider does not have", logged)
		}
		if len(trs) > 0 {
			e.Detail += fmt.Sprintf("; the provider holds %s for this claim", ids(trs))
		}
		return e, false
	}
	if len(trs) > 1 {
		e = entry(id, ReconcileDuplicate, trs, st)
		var extra []transferSeen
		for _, t := range trs {
			if t.ID != logged {
				extra = append(extra, t)
			}
		}
		e.Detail = fmt.Sprintf("%d transfers, %s in all, for a payout of %s %s; the step log records %s, extra: %s",
			len(trs), total(trs), claim.FormatAmount(st.PayoutMinor, cur), cur, logged, ids(extra))
		return e, false
	}
	t := trs[0]
	if t.Amount != st.PayoutMinor || !strings.EqualFold(t.Currency, cur) {
		e = entry(id, ReconcileAmountMismatch, trs, st)
		e.Detail = fmt.Sprintf("transfer %s pays %s %s, the step log's payout is %s %s",
			t.ID, claim.FormatAmount(t.Amount, t.Currency), t.Currency, claim.FormatAmount(st.PayoutMinor, cur), cur)
		return e, false
	}
	e = entry(id, ReconcileMatched, trs, st)
	e.Detail = "one transfer, the recorded one, for the recorded payout"
	return e, false
}

// unmadeTransfers are the claims, other than those already judged (ids),
// whose records written in the window name a transfer the provider does
// not hold for them: missing.
func (a *Activities) unmadeTransfers(ctx context.Context, in ReconcilePaymentsInput, judged []string) ([]ReconcileEntry, error) {
	recorded, err := a.Store.RecordedTransfers(ctx, in.Since, in.Until)
	if err != nil {
		return nil, err
	}
	var out []ReconcileEntry
	for _, id := range slices.Sorted(maps.Keys(recorded)) {
		if slices.Contains(judged, id) {
			continue
		}
		tid := recorded[id]
		tr, found, err := a.getTransfer(ctx, tid)
		if err != nil {
			return nil, err
		}
		holds := "does not have"
		if found {
			t := seenTransfer(tr)
			if t.ClaimID == id {
				continue // made for it, outside the window
			}
			holds = fmt.Sprintf("holds for claim %q", t.ClaimID)
		}
		st, err := a.Store.ClaimStates(ctx, []string{id})
		if err != nil {
			return nil, err
		}
		e := entry(id, ReconcileMissing, nil, st[id])
		e.LoggedTransferID = tid
		e.Detail = fmt.Sprintf("the claim's record names transfer %s, which the provider %s: its run took a payment result no payment made", tid, holds)
		out = append(out, e)
	}
	return out, nil
}

func entry(id, category string, trs []transferSeen, st store.ClaimState) ReconcileEntry {
	e := ReconcileEntry{ClaimID: id, Category: category, ClaimStatus: st.Status, LoggedTransferID: st.TransferID,
		PayoutMinor: st.PayoutMinor, Currency: st.Currency}
	for i, t := range trs {
		if i == maxTransfersPerEntry {
			break
		}
		e.TransferIDs = append(e.TransferIDs, t.ID)
		e.AmountsMinor = append(e.AmountsMinor, t.Amount)
		if e.Currency == "" {
			e.Currency = t.Currency
		}
	}
	return e
}

// ids names transfers for a detail line, at most maxTransfersPerEntry.
func ids(trs []transferSeen) string {
	var parts []string
	for i, t := range trs {
		if i == maxTransfersPerEntry {
			parts = append(parts, fmt.Sprintf("and %d more", len(trs)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s %s)", t.ID, claim.FormatAmount(t.Amount, t.Currency), t.Currency))
	}
	return strings.Join(parts, ", ")
}

// total sums transfers per currency: "3680.00 usd".
func total(trs []transferSeen) string {
	sums := map[string]int64{}
	var order []string
	for _, t := range trs {
		if _, ok := sums[t.Currency]; !ok {
			order = append(order, t.Currency)
		}
		sums[t.Currency] += t.Amount
	}
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = claim.FormatAmount(sums[c], c) + " " + c
	}
	return strings.Join(parts, " + ")
}

// getTransfer fetches one transfer by ID; found is false when the provider
// says it does not exist.
func (a *Activities) getTransfer(ctx context.Context, id string) (tr *stripe.Transfer, found bool, err error) {
	params := &stripe.TransferParams{}
	params.Context = ctx
	tr, err = a.Stripe.Transfers.Get(id, params)
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripe.ErrorCodeResourceMissing {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, classifyStripe(err)
	}
	return tr, true, nil
}

// replayedReport returns the report an earlier attempt stored under the key.
// Its discrepancies were counted then; the gauge is set again (idempotent).
func replayedReport(ctx context.Context, stored store.Reconciliation) (ReconcileReport, error) {
	var rep ReconcileReport
	if err := json.Unmarshal(stored.Report, &rep); err != nil {
		return ReconcileReport{}, fmt.Errorf("stored reconciliation %s: %w", stored.ID, err)
	}
	rep.Replayed = true
	if activity.IsActivity(ctx) {
		activity.GetMetricsHandler(ctx).Gauge(metrics.ReconciliationLastRunUnmatched).Update(float64(rep.Unmatched))
	}
	logger(ctx).Info("reconciliation already stored under this key", "key", stored.ID, "unmatched", rep.Unmatched)
	return rep, nil
}
