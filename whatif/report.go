package whatif

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/workflows"
)

// Report is a finished what-if as a model-risk reviewer reads and signs it:
// every row, ordered so the ones to look at come first, and the aggregates
// a decision on the candidate rests on. NewReport builds it; Markdown, JSON
// and Plot render it.
type Report struct {
	WhatIfID    string    `json:"whatif_id"`
	Candidate   Candidate `json:"candidate"`
	GeneratedAt time.Time `json:"generated_at"`
	Progress    Progress  `json:"progress"`
	// NotStarted are the claims the spend cap left out: they have no row.
	NotStarted []string `json:"not_started"`
	// Rows are every claim's comparison: the dangerous first, then the
	// other changed, the unchanged, the not evaluated; by claim ID within.
	Rows []Row `json:"rows"`
	// Matrix counts the evaluated claims by route then and route now.
	Matrix []MatrixCell `json:"matrix"`
	// Payouts are the payout deltas of the evaluated claims, per currency.
	Payouts []PayoutDelta `json:"payouts"`
	// Usage is what the model's answers cost per claim, then and now.
	Usage UsageComparison `json:"usage"`
	// ToolSources counts the candidate's tool answers by where they came
	// from.
	ToolSources ToolSources `json:"tool_sources"`
	// SkipsIntervention are the claims a human intervened on then that the
	// candidate would pay without one (the dangerous rows).
	SkipsIntervention []string `json:"skips_intervention"`
	// SkipsHuman are the claims a human was asked about then that the
	// candidate would decide without one (auto-approve, reject or cap).
	SkipsHuman []string `json:"skips_human"`
}

// MatrixCell is one cell of the confusion matrix: how many evaluated claims
// went Then one route and would go Now another ("" is unknown).
type MatrixCell struct {
	Then  string `json:"then"`
	Now   string `json:"now"`
	Count int    `json:"count"`
}

// PayoutDelta is what the candidate would change in one currency's payouts.
type PayoutDelta struct {
	Currency  string `json:"currency"`
	Evaluated int    `json:"evaluated"`
	// PaidThenMinor is what the evaluated claims were paid.
	PaidThenMinor int64 `json:"paid_then_minor"`
	// Decided counts the claims the candidate would decide without a
	// human (auto-approve, reject, cap); DecidedDeltaMinor sums their
	// payout now less what they were paid then.
	Decided           int   `json:"decided"`
	DecidedDeltaMinor int64 `json:"decided_delta_minor"`
	// ProposedToHumans counts the claims the candidate would send to a
	// human; ProposedToHumansMinor sums the payouts it would propose.
	ProposedToHumans      int   `json:"proposed_to_humans"`
	ProposedToHumansMinor int64 `json:"proposed_to_humans_minor"`
}

// UsageComparison is the model usage per claim, then and now.
type UsageComparison struct {
	Then UsageStats `json:"then"`
	Now  UsageStats `json:"now"`
}

// UsageStats summarises one side's model usage over the evaluated claims
// the model answered at least once.
type UsageStats struct {
	// Models are the models (and prompt versions) that answered.
	Models []string `json:"models"`
	// Claims counts the claims the model answered; NoModelCalls those it
	// never answered (the run stopped first, or a cap left it out).
	Claims       int     `json:"claims"`
	NoModelCalls int     `json:"no_model_calls"`
	Calls        int     `json:"calls"`
	TokensIn     int64   `json:"tokens_in"`
	TokensOut    int64   `json:"tokens_out"`
	MeanTokens   float64 `json:"mean_tokens"`
	// Cost is in millionths of a dollar, at the price each run used.
	CostMicros     int64   `json:"cost_micros"`
	MeanCostMicros float64 `json:"mean_cost_micros"`
	P50CostMicros  int64   `json:"p50_cost_micros"`
	P95CostMicros  int64   `json:"p95_cost_micros"`
	// Latency is over the claims whose latency is known: a call run as a
	// local activity records only when it ended (LatencyUnknown).
	LatencyKnown   int           `json:"latency_known"`
	LatencyUnknown int           `json:"latency_unknown"`
	MeanLatency    time.Duration `json:"mean_latency_ns"`
	P50Latency     time.Duration `json:"p50_latency_ns"`
	P95Latency     time.Duration `json:"p95_latency_ns"`
}

// ToolSources counts the candidate's tool answers by Source.
type ToolSources struct {
	Recorded  int `json:"recorded"`
	Live      int `json:"live"`
	Simulated int `json:"simulated"`
	Other     int `json:"other,omitempty"`
}

// NewReport builds what-if id's report from its summary and its claims'
// rows, generated at at. When s carries no progress (a report of rows
// alone), it is counted from the rows.
func NewReport(id string, s Summary, rows []Row, at time.Time) Report {
	rows = orderRows(rows)
	p := s.Progress
	if p.Total == 0 && p.Done() == 0 {
		for _, row := range rows {
			p.count(row)
		}
		p.Total, p.Started = len(rows), len(rows)
	}
	r := Report{WhatIfID: id, Candidate: s.Candidate, GeneratedAt: at, Progress: p,
		NotStarted: append([]string{}, s.NotStarted...), Rows: rows,
		Matrix: matrix(rows), Payouts: payouts(rows), ToolSources: toolSources(rows),
		Usage: UsageComparison{Then: usageStats(rows, func(r Row) Usage { return r.Then.Usage }),
			Now: usageStats(rows, func(r Row) Usage { return r.Now.Usage })},
		SkipsIntervention: []string{}, SkipsHuman: []string{}}
	for _, row := range evaluated(rows) {
		if row.Dangerous {
			r.SkipsIntervention = append(r.SkipsIntervention, row.ClaimID)
		}
		if skipsHuman(row) {
			r.SkipsHuman = append(r.SkipsHuman, row.ClaimID)
		}
	}
	return r
}

// rank is a row's place in the report: dangerous, changed, unchanged, not
// evaluated.
func rank(r Row) int {
	switch {
	case r.Error != "":
		return 3
	case r.Dangerous:
		return 0
	case r.Changed:
		return 1
	}
	return 2
}

// orderRows is a copy of rows in report order.
func orderRows(rows []Row) []Row {
	out := append(make([]Row, 0, len(rows)), rows...)
	slices.SortStableFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.ClaimID, b.ClaimID))
	})
	return out
}

// evaluated are the rows the candidate evaluated.
func evaluated(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Error == "" {
			out = append(out, r)
		}
	}
	return out
}

// decidedNow says the candidate would decide the claim without a human.
func decidedNow(r Row) bool {
	switch r.Now.Route.Route {
	case workflows.RouteAutoApprove, workflows.RouteReject, workflows.RouteCap:
		return true
	}
	return false
}

// skipsHuman says a human was asked about the claim then and would not be
// now.
func skipsHuman(r Row) bool {
	return (r.Human != nil || r.Then.Route.Route == workflows.RouteHuman) && decidedNow(r)
}

// routes are the routes in the order the matrix lists them; unknown last.
var routes = []string{workflows.RouteAutoApprove, workflows.RouteHuman, workflows.RouteReject, workflows.RouteCap, ""}

func compareRoutes(a, b string) int {
	ia, ib := slices.Index(routes, a), slices.Index(routes, b)
	if ia < 0 {
		ia = len(routes)
	}
	if ib < 0 {
		ib = len(routes)
	}
	return cmp.Or(cmp.Compare(ia, ib), strings.Compare(a, b))
}

// matrix counts the evaluated rows by route then and now.
func matrix(rows []Row) []MatrixCell {
	counts := map[[2]string]int{}
	for _, r := range evaluated(rows) {
		counts[[2]string{r.Then.Route.Route, r.Now.Route.Route}]++
	}
	cells := make([]MatrixCell, 0, len(counts))
	for k, n := range counts {
		cells = append(cells, MatrixCell{Then: k[0], Now: k[1], Count: n})
	}
	slices.SortFunc(cells, func(a, b MatrixCell) int {
		return cmp.Or(compareRoutes(a.Then, b.Then), compareRoutes(a.Now, b.Now))
	})
	return cells
}

// payouts sums the evaluated rows' payout deltas per currency.
func payouts(rows []Row) []PayoutDelta {
	by := map[string]*PayoutDelta{}
	for _, r := range evaluated(rows) {
		d := by[r.Currency]
		if d == nil {
			d = &PayoutDelta{Currency: r.Currency}
			by[r.Currency] = d
		}
		d.Evaluated++
		d.PaidThenMinor += r.PaidThenMinor
		switch {
		case decidedNow(r):
			d.Decided++
			d.DecidedDeltaMinor += r.PayoutNowMinor - r.PaidThenMinor
		case r.Now.Route.Route == workflows.RouteHuman:
			d.ProposedToHumans++
			d.ProposedToHumansMinor += r.PayoutNowMinor
		}
	}
	out := make([]PayoutDelta, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b PayoutDelta) int { return strings.Compare(a.Currency, b.Currency) })
	return out
}

// usageStats summarises side's usage over the evaluated rows.
func usageStats(rows []Row, side func(Row) Usage) UsageStats {
	s := UsageStats{Models: []string{}}
	var costs []int64
	var lats []time.Duration
	for _, r := range evaluated(rows) {
		u := side(r)
		if u.Calls == 0 {
			s.NoModelCalls++
			continue
		}
		if m := modelName(u); !slices.Contains(s.Models, m) {
			s.Models = append(s.Models, m)
		}
		s.Claims++
		s.Calls += u.Calls
		s.TokensIn += u.TokensIn
		s.TokensOut += u.TokensOut
		s.CostMicros += u.CostMicros
		costs = append(costs, u.CostMicros)
		if !u.LatencyKnown {
			s.LatencyUnknown++
			continue
		}
		s.LatencyKnown++
		lats = append(lats, u.Latency)
	}
	slices.Sort(s.Models)
	if s.Claims > 0 {
		s.MeanTokens = float64(s.TokensIn+s.TokensOut) / float64(s.Claims)
		s.MeanCostMicros = float64(s.CostMicros) / float64(s.Claims)
		s.P50CostMicros, s.P95CostMicros = percentile(costs, 50), percentile(costs, 95)
	}
	if len(lats) > 0 {
		var sum time.Duration
		for _, l := range lats {
			sum += l
		}
		s.MeanLatency = sum / time.Duration(len(lats))
		s.P50Latency, s.P95Latency = percentile(lats, 50), percentile(lats, 95)
	}
	return s
}

// modelName names a usage's model and prompt version.
func modelName(u Usage) string {
	name := cmp.Or(u.Model, "unnamed model")
	if u.PromptVersion != "" {
		name += " (prompt " + u.PromptVersion + ")"
	}
	return name
}

// percentile is the nearest-rank p-th percentile of xs (0 when empty).
func percentile[T cmp.Ordered](xs []T, p float64) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// toolSources counts the candidate's tool answers on the evaluated rows.
func toolSources(rows []Row) ToolSources {
	var t ToolSources
	for _, r := range evaluated(rows) {
		for _, a := range r.Now.Tools {
			switch a.Source {
			case SourceRecorded:
				t.Recorded++
			case SourceLive:
				t.Live++
			case SourceSimulated:
				t.Simulated++
			default:
				t.Other++
			}
		}
	}
	return t
}

// JSON writes the report as indented JSON.
func (r Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown writes the report as a document for a reviewer: what would now
// skip a human first, then the routes, payouts, cost and latency, the
// changed claims one by one, the claims not evaluated, and what the
// what-if cannot tell.
func (r Report) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# What-if %s: %s\n\n", r.WhatIfID, describeCandidate(r.Candidate))
	for _, section := range []func(*strings.Builder){
		r.mdSummary, r.mdSkipsIntervention, r.mdSkipsHuman, r.mdMatrix, r.mdPayouts, r.mdUsage,
		r.mdChanged, r.mdNotEvaluated, mdCaveats,
	} {
		section(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeCandidate names the model, the prompt version and the policy.
func describeCandidate(c Candidate) string {
	policy := "as recorded"
	switch {
	case c.Policy != nil && c.PolicyVersion != "":
		policy = c.PolicyVersion
	case c.Policy != nil:
		policy = "a candidate policy (unversioned)"
	}
	return fmt.Sprintf("%s, prompt %s, policy %s", cmp.Or(c.Model, "unnamed model"), cmp.Or(c.PromptVersion, "unversioned"), policy)
}

func (r Report) mdSummary(b *strings.Builder) {
	p := r.Progress
	fmt.Fprintf(b, "Generated %s.\n\n", r.GeneratedAt.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(b, "%d claims: %d evaluated, %d changed, %d dangerous (a human intervened then; the candidate would pay without one), %d not evaluated",
		p.Total, p.Evaluated, p.Changed, p.Dangerous, p.NotEvaluated)
	if n := len(r.NotStarted); n > 0 {
		fmt.Fprintf(b, ", %d not started", n)
	}
	fmt.Fprintf(b, ". The candidate's answers cost %s.", usd(float64(p.SpentMicros)))
	if p.StoppedBySpend {
		fmt.Fprintf(b, " **The spend cap stopped the what-if** before every claim was started: %s not started (the JSON lists them).", claims(len(r.NotStarted)))
	} else {
		b.WriteString(" The spend cap did not stop it.")
	}
	unchanged := 0
	for _, row := range r.Rows {
		if rank(row) == 2 {
			unchanged++
		}
	}
	fmt.Fprintf(b, " Unchanged: %s, counted here, not listed (the JSON has every row).\n\n", claims(unchanged))
}

func (r Report) mdSkipsIntervention(b *strings.Builder) {
	b.WriteString("## Would now skip a human who intervened\n\n")
	b.WriteString("A human lowered, rejected or handed on these claims; the candidate would pay them without one.\n\n")
	r.mdClaimList(b, r.SkipsIntervention)
}

func (r Report) mdSkipsHuman(b *strings.Builder) {
	b.WriteString("## Would now skip a human\n\n")
	var others []string
	for _, id := range r.SkipsHuman {
		if !slices.Contains(r.SkipsIntervention, id) {
			others = append(others, id)
		}
	}
	fmt.Fprintf(b, "A human was asked about these claims; the candidate would decide them without one (approve, reject or cap). "+
		"In all %s would now skip a human; those listed above are not repeated.\n\n", claims(len(r.SkipsHuman)))
	r.mdClaimList(b, others)
}

// mdClaimList lists the claims ids, each with what happened then and what
// the candidate would do; "None." when there are none.
func (r Report) mdClaimList(b *strings.Builder, ids []string) {
	if len(ids) == 0 {
		b.WriteString("None.\n\n")
		return
	}
	rows := map[string]Row{}
	for _, row := range r.Rows {
		rows[row.ClaimID] = row
	}
	for _, id := range ids {
		row := rows[id]
		fmt.Fprintf(b, "- **%s**: then %s; now %s, %s (%s on what was paid)\n", oneLine(id), oneLine(outcomeThen(row)),
			routeName(row.Now.Route.Route), payoutNow(row), signed(row.PayoutNowMinor-row.PaidThenMinor, row.Currency))
	}
	b.WriteString("\n")
}

func (r Report) mdMatrix(b *strings.Builder) {
	b.WriteString("## Routes, then × now\n\n")
	if len(r.Matrix) == 0 {
		b.WriteString("No claim was evaluated.\n\n")
		return
	}
	shown := routes[:len(routes)-1]
	if slices.ContainsFunc(r.Matrix, func(c MatrixCell) bool { return !slices.Contains(shown, c.Then) || !slices.Contains(shown, c.Now) }) {
		shown = extraRoutes(r.Matrix)
	}
	counts := map[[2]string]int{}
	for _, c := range r.Matrix {
		counts[[2]string{c.Then, c.Now}] = c.Count
	}
	b.WriteString("| then ↓ / now → |")
	for _, now := range shown {
		fmt.Fprintf(b, " %s |", routeName(now))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(shown)) + "\n")
	for _, then := range shown {
		fmt.Fprintf(b, "| %s |", routeName(then))
		for _, now := range shown {
			fmt.Fprintf(b, " %d |", counts[[2]string{then, now}])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// extraRoutes are the known routes and every other route the matrix
// names, in matrix order.
func extraRoutes(cells []MatrixCell) []string {
	all := slices.Clone(routes[:len(routes)-1])
	for _, c := range cells {
		for _, rt := range []string{c.Then, c.Now} {
			if !slices.Contains(all, rt) {
				all = append(all, rt)
			}
		}
	}
	slices.SortFunc(all, compareRoutes)
	return all
}

func (r Report) mdPayouts(b *strings.Builder) {
	b.WriteString("## Payouts\n\n")
	if len(r.Payouts) == 0 {
		b.WriteString("No claim was evaluated.\n\n")
		return
	}
	b.WriteString("Decided: claims the candidate would approve, reject or cap without a human; the change is their payout now less what was paid then. " +
		"Proposed: claims it would send to a human, with the payout it would propose (not paid).\n\n")
	b.WriteString("| currency | evaluated | paid then | decided | change in payout | proposed to humans | proposed amount |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.Payouts {
		fmt.Fprintf(b, "| %s | %d | %s | %d | %s | %d | %s |\n", cell(strings.ToUpper(cmp.Or(d.Currency, "unknown"))), d.Evaluated,
			money(d.PaidThenMinor, d.Currency), d.Decided, signed(d.DecidedDeltaMinor, d.Currency), d.ProposedToHumans,
			money(d.ProposedToHumansMinor, d.Currency))
	}
	b.WriteString("\n")
}

func (r Report) mdUsage(b *strings.Builder) {
	then, now := r.Usage.Then, r.Usage.Now
	b.WriteString("## Cost and latency per claim\n\n")
	b.WriteString("Over the evaluated claims the model answered; cost at the price each run used.\n\n")
	b.WriteString("| | then | now |\n|---|---|---|\n")
	line := func(name string, f func(UsageStats) string) {
		fmt.Fprintf(b, "| %s | %s | %s |\n", name, cell(f(then)), cell(f(now)))
	}
	line("model", func(s UsageStats) string { return cmp.Or(strings.Join(s.Models, ", "), "none") })
	line("claims answered", func(s UsageStats) string { return fmt.Sprintf("%d (%d not answered)", s.Claims, s.NoModelCalls) })
	line("model calls", func(s UsageStats) string { return fmt.Sprint(s.Calls) })
	line("tokens, mean", func(s UsageStats) string { return fmt.Sprintf("%.0f", s.MeanTokens) })
	line("cost, total", func(s UsageStats) string { return usd(float64(s.CostMicros)) })
	line("cost, mean", func(s UsageStats) string { return usd(s.MeanCostMicros) })
	line("cost, p50 / p95", func(s UsageStats) string {
		return usd(float64(s.P50CostMicros)) + " / " + usd(float64(s.P95CostMicros))
	})
	line("latency, mean", func(s UsageStats) string { return latency(s, s.MeanLatency) })
	line("latency, p50 / p95", func(s UsageStats) string { return latency(s, s.P50Latency) + " / " + latency(s, s.P95Latency) })
	line("latency unknown", func(s UsageStats) string { return claims(s.LatencyUnknown) })
	t := r.ToolSources
	tools := fmt.Sprintf("%d recorded, %d live, %d simulated", t.Recorded, t.Live, t.Simulated)
	if t.Other > 0 {
		tools += fmt.Sprintf(", %d other", t.Other)
	}
	fmt.Fprintf(b, "| tool answers | as recorded | %s |\n\n", tools)
}

func latency(s UsageStats, d time.Duration) string {
	if s.LatencyKnown == 0 {
		return "unknown"
	}
	return d.Round(time.Millisecond).String()
}

func (r Report) mdChanged(b *strings.Builder) {
	b.WriteString("## Changed claims\n\n")
	var changed []Row
	for _, row := range r.Rows {
		if rank(row) <= 1 {
			changed = append(changed, row)
		}
	}
	if len(changed) == 0 {
		b.WriteString("None.\n\n")
		return
	}
	b.WriteString("| claim | outcome then | route then → now | payout then → now | reasons added | reasons dropped | rationale then | rationale now |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, row := range changed {
		id := cell(row.ClaimID)
		if row.Dangerous {
			id = "**" + id + "** (dangerous)"
		}
		fmt.Fprintf(b, "| %s | %s | %s → %s | %s → %s | %s | %s | %s | %s |\n", id, cell(outcomeThen(row)),
			routeName(row.Then.Route.Route), routeName(row.Now.Route.Route), money(row.PaidThenMinor, row.Currency), payoutNow(row),
			cell(strings.Join(row.ReasonsAdded, "; ")), cell(strings.Join(row.ReasonsDropped, "; ")),
			cell(rationale(row.Then)), cell(rationale(row.Now)))
	}
	b.WriteString("\n")
}

func (r Report) mdNotEvaluated(b *strings.Builder) {
	var rows []Row
	for _, row := range r.Rows {
		if row.Error != "" {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Not evaluated\n\n| claim | why |\n|---|---|\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| %s | %s |\n", cell(row.ClaimID), cell(row.Error))
	}
	b.WriteString("\n")
}

func mdCaveats(b *strings.Builder) {
	b.WriteString(`## What this cannot tell you

- What a human would decide on a claim the candidate sends to one: its payout is proposed, not paid.
- Tool answers marked live were read now, not when the claim was decided; what the stores held then may differ.
- Documents gone from the blob store since the claim was decided: the candidate could not read them where the recorded call was not the same.
- The prior-claims count and the exclusion hits are as recorded at intake, not as they would be read today.
`)
}

// outcomeThen says how the recorded run ended and what its approvers did.
func outcomeThen(r Row) string {
	paid := ""
	if r.Outcome == "paid" {
		paid = "paid " + money(r.PaidThenMinor, r.Currency)
	}
	tail := cmp.Or(paid, r.Outcome, "outcome unknown")
	h := r.Human
	if h == nil {
		return tail
	}
	var what []string
	if h.HandedOn {
		what = append(what, "handed on between approvers")
	}
	switch {
	case h.Verdict == approvals.Reject:
		s := "rejected by approver"
		if h.RejectedReason != "" {
			s += " (" + h.RejectedReason + ")"
		}
		what = append(what, s)
		if r.Outcome == "rejected" {
			tail = ""
		}
	case h.Lowered:
		what = append(what, fmt.Sprintf("approver lowered to %s (proposed %s)", money(h.ApprovedMinor, r.Currency), money(h.RequestedMinor, r.Currency)))
		if r.Outcome == "paid" && r.PaidThenMinor == h.ApprovedMinor {
			tail = ""
		}
	case h.Verdict == approvals.Approve:
		what = append(what, "approved by approver")
	case h.Expired:
		what = append(what, "sent to a human, expired")
		if r.Outcome == "expired" {
			tail = ""
		}
	default:
		what = append(what, "sent to a human, nobody decided")
	}
	if tail != "" {
		what = append(what, tail)
	}
	return strings.Join(what, ", ")
}

// payoutNow is what the candidate would pay, or propose to a human.
func payoutNow(r Row) string {
	if r.Now.Route.Route == workflows.RouteHuman {
		return "proposed " + money(r.PayoutNowMinor, r.Currency)
	}
	return money(r.PayoutNowMinor, r.Currency)
}

// rationaleLen is how many characters of a rationale the tables show.
const rationaleLen = 200

// rationale is a side's assessment rationale, cut to rationaleLen.
func rationale(s Side) string {
	if s.Assessment == nil {
		return ""
	}
	rs := []rune(oneLine(s.Assessment.Rationale))
	if len(rs) <= rationaleLen {
		return string(rs)
	}
	return strings.TrimSpace(string(rs[:rationaleLen])) + "…"
}

// routeName is a route as the document names it.
func routeName(rt string) string { return cmp.Or(rt, "unknown") }

// oneLine collapses every run of white space, newlines included, to one
// space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell makes s safe inside a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// claims counts claims in words: "1 claim", "2 claims".
func claims(n int) string {
	if n == 1 {
		return "1 claim"
	}
	return fmt.Sprintf("%d claims", n)
}

// usd formats millionths of a dollar.
func usd(micros float64) string { return fmt.Sprintf("$%.6f", micros/1e6) }

// money formats minor units of currency: "1,200.00 EUR".
func money(minor int64, currency string) string { return claim.FormatMoney(minor, currency) }

// signed is money with a sign: "+400.00 EUR", "-400.00 EUR".
func signed(minor int64, currency string) string {
	if minor > 0 {
		return "+" + money(minor, currency)
	}
	return money(minor, currency)
}

// Colours of the payout plot.
var (
	plotRed  = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	plotBlue = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	plotGrey = color.RGBA{R: 150, G: 150, B: 150, A: 255}
)

// Plot writes an SVG of the payout change per changed claim (payout now
// less paid then, in major units), the dangerous claims in red. With
// claims in several currencies it draws the most common one and says so.
func (r Report) Plot(path string) error {
	p, err := r.payoutPlot()
	if err != nil {
		return err
	}
	return writeSVG(path, p, 9*vg.Inch, 4.5*vg.Inch)
}

// payoutPlot draws the changed claims of the most common currency.
func (r Report) payoutPlot() (*plot.Plot, error) {
	var changed []Row
	for _, row := range r.Rows {
		if rank(row) <= 1 {
			changed = append(changed, row)
		}
	}
	cur := commonCurrency(changed)
	var shown []Row
	for _, row := range changed {
		if row.Currency == cur {
			shown = append(shown, row)
		}
	}
	p := plot.New()
	title := "Payout now − paid then, per changed claim"
	if len(shown) < len(changed) {
		title += fmt.Sprintf(" (%s only: %d of %d changed claims; other currencies not shown)", strings.ToUpper(cur), len(shown), len(changed))
	}
	p.Title.Text = title + "\n" + describeCandidate(r.Candidate)
	if len(shown) == 0 {
		p.Title.Text = "No changed claims: nothing to plot\n" + describeCandidate(r.Candidate)
		p.HideAxes()
		sans(p)
		return p, nil
	}
	p.Y.Label.Text = "payout now − paid then, " + strings.ToUpper(cur)
	if err := addBars(p, shown); err != nil {
		return nil, err
	}
	claimAxis(p, shown)
	sans(p)
	return p, nil
}

// commonCurrency is the currency most rows are in (the first by name on
// a tie).
func commonCurrency(rows []Row) string {
	n := map[string]int{}
	best := ""
	for _, r := range rows {
		n[r.Currency]++
	}
	for c, k := range n {
		if k > n[best] || (k == n[best] && c < best) {
			best = c
		}
	}
	return best
}

// addBars adds one bar per row, the dangerous (listed first) in red, and
// a line at zero.
func addBars(p *plot.Plot, rows []Row) error {
	width := vg.Points(max(1, min(24, 420/float64(len(rows)))))
	var danger, other plotter.Values
	for _, r := range rows {
		v := major(r.PayoutNowMinor-r.PaidThenMinor, r.Currency)
		if r.Dangerous {
			danger = append(danger, v)
		} else {
			other = append(other, v)
		}
	}
	for _, s := range []struct {
		vs     plotter.Values
		x      float64
		c      color.Color
		legend string
	}{
		{danger, 0, plotRed, "dangerous: a human intervened then, none now"},
		{other, float64(len(danger)), plotBlue, "other changed claims"},
	} {
		if len(s.vs) == 0 {
			continue
		}
		bc, err := plotter.NewBarChart(s.vs, width)
		if err != nil {
			return err
		}
		bc.XMin, bc.Color, bc.LineStyle.Width = s.x, s.c, 0
		p.Add(bc)
		p.Legend.Add(s.legend, bc)
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(rows)) - 0.5, Y: 0}})
	if err != nil {
		return err
	}
	zero.Color = plotGrey
	p.Add(zero)
	p.Legend.Top = true
	return nil
}

// claimAxis names the bars by claim when there are few enough to read.
func claimAxis(p *plot.Plot, rows []Row) {
	p.X.Min, p.X.Max = -0.6, float64(len(rows))-0.4
	p.X.Label.Text = "a claim now sent to a human shows the payout the candidate would propose"
	if len(rows) > 40 {
		p.X.Label.Text = fmt.Sprintf("%d changed claims, dangerous first, by claim ID (the report lists them); ", len(rows)) + p.X.Label.Text
		p.X.Tick.Marker = plot.ConstantTicks{}
		return
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.ClaimID
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	if len(rows) > 8 {
		p.X.Tick.Label.Rotation = math.Pi / 4
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
}

// major is minor units in major units of currency.
func major(minor int64, currency string) float64 {
	exp, ok := claim.CurrencyExponent(currency)
	if !ok {
		exp = 2
	}
	return float64(minor) / math.Pow10(exp)
}

// sans sets every text of p in Liberation Sans.
func sans(p *plot.Plot) {
	for _, f := range []*font.Variant{&p.Title.TextStyle.Font.Variant, &p.X.Label.TextStyle.Font.Variant, &p.Y.Label.TextStyle.Font.Variant,
		&p.X.Tick.Label.Font.Variant, &p.Y.Tick.Label.Font.Variant, &p.Legend.TextStyle.Font.Variant} {
		*f = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
}

// writeSVG draws p on a white w×h SVG at path.
func writeSVG(path string, p *plot.Plot, w, h vg.Length) error {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, 4, -8, 4, -4))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	svg := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	return os.WriteFile(path, svg, 0o644)
}
