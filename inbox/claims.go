package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/story"
	"github.com/durableclaims/durableclaims/workflows"
)

// entry is one claim in an approver's inbox.
type entry struct {
	ClaimID  string
	Approval *approvals.Approval
	// ForYou: a colleague (HandedBy) handed the request to this approver.
	ForYou   bool
	HandedBy string
}

// pageSize is how many claims a page of the inbox lists.
const pageSize = 50

// listing is the inbox page: one page of the claims this approver may
// decide, oldest deadline first, the counts, and the filters it is under.
type listing struct {
	Entries []entry
	// HandedToYou are the first of the claims handed to this approver,
	// above the list on its first page.
	HandedToYou []entry
	Counts      store.QueueCounts
	Filter      listFilter
	// Next is the address of the next page, empty on the last; Top the
	// first page's, under the same filters.
	Next, Top string
	// First: this is the first page.
	First bool
}

// listFilter is what the approver narrowed the list to, as the form
// shows it.
type listFilter struct {
	Stage, Currency, Min, Max string
	Mine                      bool
	Any                       bool // any filter is set
}

// inbox lists the claims this approver may decide (their stage, role and
// limit decide which), oldest deadline first, a page at a time, from the
// approval queue: no claim's workflow is asked, however many wait. The
// claim page asks the workflow, and the workflow decides.
func (s *server) inbox(w http.ResponseWriter, r *http.Request, v viewer) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	f, lf, after, err := parseListing(r.URL.Query(), v)
	if err != nil {
		s.render(w, r, http.StatusBadRequest, "inbox", page{Title: "Claims waiting for you", Viewer: &v, Data: listing{Filter: lf}, Problem: err.Error()})
		return
	}
	rows, err := s.queue.ApprovalQueue(ctx, f, after, pageSize+1)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "the approval queue cannot be read", err)
		return
	}
	out := listing{Filter: lf, First: after == nil}
	q := r.URL.Query()
	q.Del("after")
	out.Top = "/?" + q.Encode()
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		last := rows[len(rows)-1]
		q.Set("after", store.CursorAfter(last).String())
		out.Next = "/?" + q.Encode()
	}
	out.Entries = entries(rows, v.ID)
	if out.Counts, err = s.queue.CountQueue(ctx, f); err != nil {
		s.fail(w, r, http.StatusBadGateway, "the approval queue cannot be read", err)
		return
	}
	if out.First && !lf.Mine && out.Counts.AssignedToYou > 0 {
		mine := store.QueueFilter{Viewer: f.Viewer, AssignedTo: v.ID}
		handed, err := s.queue.ApprovalQueue(ctx, mine, nil, 10)
		if err != nil {
			s.fail(w, r, http.StatusBadGateway, "the approval queue cannot be read", err)
			return
		}
		out.HandedToYou = entries(handed, v.ID)
	}
	fl := s.cookies.takeFlash(w, r, r.URL.EscapedPath())
	s.render(w, r, http.StatusOK, "inbox", page{Title: "Claims waiting for you", Viewer: &v, Data: out, Notice: fl.Notice, Problem: fl.Problem})
}

// entries are queue rows as the page lists them. A row whose summary does
// not read is listed by its claim and amount alone.
func entries(rows []store.QueueEntry, me string) []entry {
	out := make([]entry, 0, len(rows))
	for _, row := range rows {
		var a approvals.Approval
		if json.Unmarshal(row.Summary, &a) != nil {
			a = approvals.Approval{Stage: approvals.Stage(row.Stage), Deadline: row.Deadline, ExpiresAt: row.Deadline,
				Request: approvals.Request{ClaimID: row.ClaimID, AmountMinor: row.AmountMinor, Currency: row.Currency}}
		}
		e := entry{ClaimID: row.ClaimID, Approval: &a, ForYou: row.AssignedTo == me && me != ""}
		if e.ForYou && len(a.Handoffs) > 0 {
			e.HandedBy = a.Handoffs[len(a.Handoffs)-1].From
		}
		out = append(out, e)
	}
	return out
}

// parseListing reads the list's filters and page from the query string,
// refusing what does not parse with the field and the reason.
func parseListing(q url.Values, v viewer) (store.QueueFilter, listFilter, *store.QueueCursor, error) {
	f := store.QueueFilter{Viewer: store.ViewerOf(v.Approver)}
	lf := listFilter{Stage: q.Get("stage"), Currency: strings.ToLower(strings.TrimSpace(q.Get("currency"))),
		Min: strings.TrimSpace(q.Get("min")), Max: strings.TrimSpace(q.Get("max")), Mine: q.Get("mine") == "1"}
	lf.Any = lf.Stage != "" || lf.Currency != "" || lf.Min != "" || lf.Max != "" || lf.Mine
	switch lf.Stage {
	case "", string(approvals.StageWaiting), string(approvals.StageEscalated):
		f.Stage = lf.Stage
	default:
		return f, lf, nil, fmt.Errorf("stage: %q is not a stage (waiting, escalated)", clipText(lf.Stage))
	}
	if lf.Currency != "" {
		if _, ok := v.Limits[lf.Currency]; !ok {
			return f, lf, nil, fmt.Errorf("currency: you decide no claims in %q", clipText(lf.Currency))
		}
		f.Currency = lf.Currency
	}
	for _, b := range []struct {
		name, text string
		to         *int64
	}{{"min", lf.Min, &f.MinMinor}, {"max", lf.Max, &f.MaxMinor}} {
		if b.text == "" {
			continue
		}
		if lf.Currency == "" {
			return f, lf, nil, fmt.Errorf("%s: choose a currency for an amount band", b.name)
		}
		minor, err := claim.ParseAmount(b.text, lf.Currency)
		if err != nil {
			return f, lf, nil, fmt.Errorf("%s: %v", b.name, err)
		}
		*b.to = minor
	}
	if f.MinMinor > 0 && f.MaxMinor > 0 && f.MinMinor > f.MaxMinor {
		return f, lf, nil, errors.New("min: above max")
	}
	if lf.Mine {
		f.AssignedTo = v.ID
	}
	var after *store.QueueCursor
	if a := q.Get("after"); a != "" {
		c, err := store.ParseQueueCursor(a)
		if err != nil {
			return f, lf, nil, fmt.Errorf("after: %v", err)
		}
		after = &c
	}
	return f, lf, after, nil
}

// clipText keeps a refused value short enough to echo.
func clipText(s string) string {
	if len(s) > 32 {
		return strings.ToValidUTF8(s[:32], "") + "…"
	}
	return s
}

// mayDecide says whether an approver could decide the request a claim
// waits on now, and if not, why: the same questions the workflow's rule
// book asks (it asks again, and has the last word).
func mayDecide(ap authority.Approver, st workflows.Status) (bool, string) {
	a := st.Approval
	switch {
	case a == nil || a.Decision != nil || (st.State != workflows.StatusWaiting && st.State != workflows.StatusEscalated):
		return false, "the claim is not waiting for a decision"
	case a.Stage == approvals.StageEscalated && ap.Role != authority.Supervisor:
		return false, "the claim is escalated: a supervisor decides"
	}
	if limit, ok := ap.Limits[a.Request.Currency]; !ok || limit < a.Request.AmountMinor {
		return false, "the amount is over your limit"
	}
	for _, vote := range a.Votes {
		if vote.Approver == ap.ID {
			return false, "you approved it: a second approver must agree"
		}
	}
	return true, ""
}

func (s *server) status(ctx context.Context, id string) (workflows.Status, error) {
	var st workflows.Status
	val, err := s.temporal.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, val.Get(&st)
}

// claimView is everything the claim page shows, in the order an adjuster
// reads it before deciding: what happened in the claimant's words, the
// policy and coverage, the documents, the model's advice, the history;
// then the request and the decision.
type claimView struct {
	ID        string
	Status    workflows.Status
	Approval  *approvals.Approval
	Claim     claim.Claim
	Policy    *claim.Policy // as intake read it; nil if it found none
	CanDecide bool
	WhyNot    string
	// Advice is the triage agent's answer (its last turn); Turns how it got there.
	Advice    *activities.Triage
	Turns     []turnView
	Tools     int
	Documents []docView
	// Waiting: the request is open; its timeline and the forms apply.
	Waiting  bool
	Terminal bool
	// FromFile says the page was read from the claim file, the run's
	// history being gone.
	FromFile string
	// TraceID is the claim's trace, TraceURL the link to it
	// (TRACE_URL_TEMPLATE).
	TraceID, TraceURL string
	// Colleagues are who the request may be handed to: those who could
	// decide it now (the workflow checks again).
	Colleagues []authority.Approver
}

// docView is one document and how the page shows it: an image or a PDF
// inside the page (served from /view under a sandbox CSP), anything else
// as a download only.
type docView struct {
	N      int
	Name   string
	Size   int64
	SHA256 string
	Kind   string // "image", "pdf" or ""
}

// documentViews are a claim's documents as the page shows them.
func documentViews(c claim.Claim) []docView {
	var out []docView
	for i, d := range c.Documents {
		out = append(out, docView{N: i, Name: d.Name, Size: d.Size, SHA256: d.SHA256, Kind: viewKinds[strings.ToLower(path.Ext(d.Name))]})
	}
	return out
}

// viewKinds are the document types the page shows inline, by extension;
// the /view endpoint checks the bytes say the same.
var viewKinds = map[string]string{".jpg": "image", ".jpeg": "image", ".png": "image", ".gif": "image", ".webp": "image", ".pdf": "pdf"}

// sniffed maps what http.DetectContentType finds to the kinds above.
var sniffed = map[string]string{"image/jpeg": "image", "image/png": "image", "image/gif": "image", "image/webp": "image", "application/pdf": "pdf"}

// turnView is one triage turn, and the tool calls it made.
type turnView struct {
	N      int
	Asked  []string
	Answer *activities.Triage
	Tools  []toolView
}

type toolView struct{ Name, Result string }

// claimPage shows exactly the request whose hash the approver signs, and
// what led to it: payee, amount, coverage arithmetic, the model's
// rationale, the triage turns and tool calls, the documents, the decision
// attempts so far, the quorum.
func (s *server) claimPage(w http.ResponseWriter, r *http.Request, v viewer) {
	cv, status, msg, err := s.load(r.Context(), r.PathValue("id"), v)
	if err != nil || status != 0 {
		s.fail(w, r, status, msg, err)
		return
	}
	f := s.cookies.takeFlash(w, r, r.URL.EscapedPath())
	s.render(w, r, http.StatusOK, "claim", page{Title: "Claim " + cv.ID, Viewer: &v, Data: cv, Notice: f.Notice, Problem: f.Problem})
}

func (s *server) load(ctx context.Context, id string, v viewer) (claimView, int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cv := claimView{ID: id}
	st, err := s.status(ctx, id)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		// Temporal forgot the run (or never had it): its claim file, if
		// there is one, still tells the claim (docs/records.md).
		return s.fromClaimFile(ctx, cv, v)
	}
	if err != nil {
		return cv, http.StatusBadGateway, "the claim's status cannot be read", err
	}
	if !mayView(v.Approver, st) {
		return cv, http.StatusForbidden, "this claim is not for you", nil
	}
	cv.Status, cv.Approval = st, st.Approval
	cv.CanDecide, cv.WhyNot = mayDecide(v.Approver, st)
	cv.Terminal = st.State != workflows.StatusRunning && st.State != workflows.StatusWaiting && st.State != workflows.StatusEscalated
	cv.Waiting = st.Approval.Decision == nil && (st.State == workflows.StatusWaiting || st.State == workflows.StatusEscalated)
	read, err := story.ReadHistory(ctx, s.temporal, s.dc, id) // the status is queried above
	if err != nil {
		return cv, http.StatusBadGateway, "the claim's history cannot be read", err
	}
	fromStory(read, &cv)
	cv.Documents = documentViews(cv.Claim)
	if cv.CanDecide {
		cv.Colleagues = colleagues(v, st, cv.Claim.Claimant)
	}
	return cv, 0, "", nil
}

// colleagues are the approvers other than v who could decide the request
// now and are not the claimant: the only ones a hand-on may name.
func colleagues(v viewer, st workflows.Status, claimant claim.Claimant) []authority.Approver {
	var out []authority.Approver
	for _, a := range v.book.Approvers {
		if a.ID == v.ID || a.Is(claimant.Email) || a.Is(claimant.StripeAccount) {
			continue
		}
		if ok, _ := mayDecide(a, st); ok {
			out = append(out, a)
		}
	}
	return out
}

// mayView: whoever could decide the request (their role fits its stage,
// their limit its amount) and whoever took part in it (decided, or handed
// it on, or was handed it) see the claim and its documents; nobody else. An
// adjuster with a 1,500.00 limit does not read the payee and documents of a
// 9,000.00 claim.
func mayView(ap authority.Approver, st workflows.Status) bool {
	a := st.Approval
	if a == nil {
		return false
	}
	limit, ok := ap.Limits[a.Request.Currency]
	if ok && limit >= a.Request.AmountMinor && (a.Stage != approvals.StageEscalated || ap.Role == authority.Supervisor) {
		return true
	}
	for _, at := range st.Attempts {
		if at.Accepted && at.Approver == ap.ID {
			return true
		}
	}
	for _, h := range a.Handoffs {
		if h.From == ap.ID || h.To == ap.ID {
			return true
		}
	}
	return false
}

// fromStory reads, from the claim's history, the claim and its policy as
// intake (or the last re-read) loaded them, its documents by reference, and
// the triage turns with their tool calls.
func fromStory(st *story.Story, cv *claimView) {
	cv.TraceID, cv.TraceURL = st.TraceID, config.TraceURL(st.TraceID)
	for _, step := range st.Steps {
		switch step.Activity {
		case "LoadClaim":
			var loaded activities.LoadClaimResult
			if json.Unmarshal(step.Output, &loaded) == nil && loaded.Claim.ID != "" {
				cv.Claim = loaded.Claim
				if loaded.Policy != nil {
					cv.Policy = loaded.Policy
				}
			}
		case "TriageTurn":
			var t activities.TurnResult
			if json.Unmarshal(step.Output, &t) != nil {
				continue
			}
			tv := turnView{N: len(cv.Turns) + 1, Answer: t.Triage}
			for _, call := range t.ToolCalls {
				tv.Asked = append(tv.Asked, call.Name)
			}
			if t.Triage != nil {
				cv.Advice = t.Triage
			}
			cv.Turns = append(cv.Turns, tv)
		case "CallTool":
			var out activities.ToolResult
			if json.Unmarshal(step.Output, &out) != nil || len(cv.Turns) == 0 {
				continue
			}
			result := out.Content
			if len(result) > 600 {
				result = result[:600] + "…"
			}
			last := &cv.Turns[len(cv.Turns)-1]
			last.Tools = append(last.Tools, toolView{Name: out.Name, Result: result})
			cv.Tools++
		}
	}
}

// live is the claim's state as JSON, for the page to follow it after a
// decision (to paid, or to the second approver).
func (s *server) live(w http.ResponseWriter, r *http.Request, v viewer) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := s.status(ctx, r.PathValue("id"))
	if err != nil || !mayView(v.Approver, st) {
		http.Error(w, `{"error":"unavailable"}`, http.StatusNotFound)
		return
	}
	out := map[string]any{"state": st.State, "step": st.StepName, "transfer_id": st.TransferID, "payout": st.Payout,
		"currency": strings.ToUpper(st.Currency)}
	if a := st.Approval; a != nil {
		out["votes"], out["quorum"] = len(a.Votes), a.Quorum
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// decide signs a receipt for the signed-in approver with the inbox's
// service key, for the request hash the page showed, and sends it through
// the decide update: a refusal (over the limit, a stale page, already
// decided, not your stage) comes back at once and is shown.
func (s *server) decide(w http.ResponseWriter, r *http.Request, v viewer) {
	id := r.PathValue("id")
	path := "/claims/" + url.PathEscape(id)
	back := func(kind, msg string) {
		f := flash{Path: path, Notice: msg}
		if kind == "problem" {
			f = flash{Path: path, Problem: msg}
		}
		if err := s.cookies.setFlash(w, f); err != nil {
			s.log.Error("flash", "error", err)
		}
		http.Redirect(w, r, path, http.StatusSeeOther)
	}
	rec := approvals.Receipt{Subject: v.ID, ClaimID: id, RequestSHA256: r.PostFormValue("request_sha256"),
		Reason: strings.TrimSpace(r.PostFormValue("reason")), Note: strings.TrimSpace(r.PostFormValue("note"))}
	switch action := r.PostFormValue("action"); action {
	case "approve":
		rec.Verdict = approvals.Approve
	case "reject":
		rec.Verdict = approvals.Reject
	case "lower":
		rec.Verdict = approvals.Approve
		minor, err := claim.ParseAmount(strings.TrimSpace(r.PostFormValue("amount")), r.PostFormValue("currency"))
		if err != nil {
			back("problem", "the lower amount: "+err.Error())
			return
		}
		rec.AmountMinor = minor
	case "handoff":
		rec.Verdict, rec.AssignTo = approvals.Handoff, r.PostFormValue("assign_to")
		rec.Note, rec.Reason = rec.Reason, ""
	default:
		back("problem", "choose a decision")
		return
	}
	// The receipt is addressed to this claim's namespace and deployment, as
	// the claim itself says: a receipt the inbox signs here decides nothing
	// elsewhere.
	st, err := s.status(r.Context(), id)
	if err != nil {
		back("problem", "the claim's status cannot be read: try again")
		return
	}
	rec.Audience = st.Audience
	rec, err = approvals.NewReceipt(rec, time.Now(), approvals.DefaultReceiptTTL)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot make the receipt", err)
		return
	}
	tok, err := approvals.Sign(s.key, rec)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot sign the receipt", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ctx, span := telemetry.StartDecision(ctx, s.temporal, id, v.ID, "inbox")
	defer span.End()
	h, err := s.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: approvals.UpdateDecide,
		Args: []any{approvals.DecideInput{Receipt: tok}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var d approvals.Decision
	if err == nil {
		err = h.Get(ctx, &d)
	}
	span.SetAttributes(attribute.String(telemetry.AttrVerdict, string(rec.Verdict)), attribute.Bool("claim.decision.accepted", err == nil))
	if err != nil {
		s.log.Info("decision refused", "claim", id, "approver", v.ID, "error", err)
		back("problem", "Refused: "+refusal(err))
		return
	}
	s.log.Info("decision sent", "claim", id, "approver", v.ID, "verdict", d.Verdict, "jti", rec.ID)
	notice := map[approvals.Verdict]string{approvals.Approve: "Approved", approvals.Reject: "Rejected",
		approvals.Handoff: "Handed to " + rec.AssignTo}[d.Verdict]
	if d.Verdict == approvals.Approve && rec.AmountMinor > 0 {
		notice = "Approved " + v.format.Money(rec.AmountMinor, r.PostFormValue("currency"))
	}
	back("notice", notice+": receipt "+rec.ID[:8]+" accepted by the claim")
}

// refusal is what the workflow said, without the SDK's wrapping.
func refusal(err error) string {
	return approvals.RefusalMessage(err)
}

// document streams one of the claim's documents from the blob store, to
// an approver who may see the claim, as a download.
func (s *server) document(w http.ResponseWriter, r *http.Request, v viewer) {
	d, b, ok := s.readDocument(w, r, v)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", http.DetectContentType(b))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", safeName(d.Name)))
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	_, _ = w.Write(b)
}

// viewDocument serves an image or a PDF for the claim page to show: only
// when its bytes are what its name says (the type is sniffed, never taken
// from the claimant), under a sandbox CSP (no script, no origin of ours), and
// framed only by the inbox itself. Anything else is a download only.
func (s *server) viewDocument(w http.ResponseWriter, r *http.Request, v viewer) {
	d, b, ok := s.readDocument(w, r, v)
	if !ok {
		return
	}
	ct := http.DetectContentType(b)
	if d.Kind == "" || sniffed[ct] != d.Kind {
		s.fail(w, r, http.StatusUnsupportedMediaType, "this document is not an image or a PDF: download it instead", nil)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", safeName(d.Name)))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox; frame-ancestors 'self'")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Cache-Control", "private, no-store")
	_, _ = w.Write(b)
}

// readDocument reads document n of the claim for v, or answers the request
// with why not.
func (s *server) readDocument(w http.ResponseWriter, r *http.Request, v viewer) (docView, []byte, bool) {
	cv, status, msg, err := s.load(r.Context(), r.PathValue("id"), v)
	if err != nil || status != 0 {
		s.fail(w, r, max(status, http.StatusBadGateway), msg, err)
		return docView{}, nil, false
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(cv.Claim.Documents) || cv.Claim.Documents[n].URI == "" {
		s.fail(w, r, http.StatusNotFound, "no such document", nil)
		return docView{}, nil, false
	}
	d := cv.Claim.Documents[n]
	if err := s.blobs.CheckDocument(cv.Claim.DocumentsOf(), d.URI); err != nil {
		s.fail(w, r, http.StatusForbidden, "not one of this claim's documents", err)
		return docView{}, nil, false
	}
	b, err := s.blobs.Get(r.Context(), blobs.Ref{URI: d.URI, SHA256: d.SHA256, Size: d.Size}, blobs.DefaultMaxSize)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "the document cannot be read", err)
		return docView{}, nil, false
	}
	return cv.Documents[n], b, true
}

func safeName(n string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' || r == '/' {
			return '_'
		}
		return r
	}, n)
}

// fromClaimFile is the claim page of a claim whose run Temporal no longer
// holds, read from its claim file in the blob store, for whoever could
// have decided it or took part; the page says where it was read from.
func (s *server) fromClaimFile(ctx context.Context, cv claimView, v viewer) (claimView, int, string, error) {
	keys, err := s.blobs.List(ctx, "claim-files/"+cv.ID+"/")
	if err != nil {
		return cv, http.StatusBadGateway, "the claim's file cannot be read", err
	}
	if len(keys) == 0 {
		return cv, http.StatusNotFound, "no such claim", nil
	}
	// A redriven claim has two: the dead-lettered run's, then the file of
	// the run that ended it. The page shows the latest.
	var f claimfile.File
	var key string
	for _, k := range keys {
		body, err := s.blobs.ReadKey(ctx, k, blobs.DefaultMaxSize)
		if err != nil {
			return cv, http.StatusBadGateway, "the claim's file cannot be read", err
		}
		// A claim file is stored under its own SHA-256: one edited in place
		// no longer is.
		if claimfile.Digest(body)+".json" != path.Base(k) {
			return cv, http.StatusBadGateway, "the claim's file does not verify: " + path.Base(k) + " is not its SHA-256", nil
		}
		var one claimfile.File
		if err := json.Unmarshal(body, &one); err != nil || one.ClaimID != cv.ID {
			return cv, http.StatusBadGateway, "the claim's file is not readable", err
		}
		if key == "" || one.WrittenAt.After(f.WrittenAt) {
			f, key = one, k
		}
	}
	var rec workflows.AuditRecord
	if err := json.Unmarshal(f.Record, &rec); err != nil {
		return cv, http.StatusBadGateway, "the claim's file is not readable", err
	}
	st := workflows.Status{ClaimID: cv.ID, State: f.Outcome, Attempts: rec.Attempts, AttemptsDropped: rec.AttemptsDropped, TransferID: rec.TransferID}
	if n := len(rec.Approvals); n > 0 {
		st.Approval = rec.Approvals[n-1]
	}
	if !mayView(v.Approver, st) {
		return cv, http.StatusForbidden, "this claim is not for you", nil
	}
	// The inbox holds no ledger key or store: it shows a file only if the
	// file holds together (its name is its digest; its record's digest,
	// every receipt against its key and request); claimsctl verify proves
	// it against the signed log.
	if ps := f.Check(); len(ps) > 0 {
		return cv, http.StatusBadGateway, "the claim's file does not verify: " + ps[0].String(), nil
	}
	cv.Status, cv.Approval, cv.Terminal, cv.FromFile = st, st.Approval, true, claimFileNote(key, f)
	steps := make([]*story.Step, 0, len(f.Steps))
	for _, step := range f.Steps {
		steps = append(steps, &story.Step{Activity: step.Activity, Local: step.Local, Attempt: step.Attempt, Outcome: step.Outcome, Output: step.Output})
	}
	fromStory(&story.Story{ClaimID: cv.ID, TraceID: f.TraceID, Steps: steps}, &cv)
	cv.Documents = documentViews(cv.Claim)
	return cv, 0, "", nil
}

func claimFileNote(key string, f claimfile.File) string {
	return fmt.Sprintf("Read from the claim's file (%s, written %s): the run's history is gone from Temporal. %s",
		path.Base(key), f.WrittenAt.UTC().Format("2006-01-02 15:04 UTC"), f.Basis)
}
