package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// decision is what the approver did for one claim.
type decision struct {
	ClaimID  string `json:"claim_id"`
	Verdict  string `json:"verdict"` // the decision sent: approve or reject
	Approver string `json:"approver"`
	Reason   string `json:"reason,omitempty"`

	SeenWaitingAt time.Time `json:"seen_waiting_at"`
	FirstSentAt   time.Time `json:"first_sent_at"`
	DecidedSeenAt time.Time `json:"decided_seen_at"`
	// FromQueue says the request was read from the approval queue: the
	// claim answered its status query without its approval (a build that
	// cannot replay the run answered it, see approver.send).
	FromQueue bool `json:"from_queue,omitempty"`
	// Sends counts CLI calls that succeeded; CLIFailures those that failed
	// (the server restarting, say) and were tried again; Resends the sends
	// made because the claim was still undecided after one had succeeded.
	Sends       int `json:"sends"`
	CLIFailures int `json:"cli_failures"`
	Resends     int `json:"resends"`
	// ResendWhy says, for each resend, what the claim showed.
	ResendWhy []string `json:"resend_why,omitempty"`
}

// approver plays the adjuster: it finds claims waiting for approval and,
// after a random delay, decides each with the real Temporal CLI, as a human
// would from a runbook.
type approver struct {
	client  client.Client
	cli     string
	address string
	cliEnv  []string // what the CLI needs to reach the server (a token)
	prefix  string
	plan    map[string]plannedClaim
	within  time.Duration // the longest delay before deciding
	key     authority.KeyFile
	log     *slog.Logger
	// queue is the approval queue the inbox lists (nil: none to read).
	queue *store.Store

	sem chan struct{} // bounds concurrent CLI processes on a 2-core machine
	// gate, when set, says what a claim's decision waits for (nil: none):
	// the rollout soak decides the claims parked under v1 only once v2 is
	// current, and those parked under v2 only once v3 ramps.
	gate func(id string) <-chan struct{}

	mu   sync.Mutex
	book map[string]*decision
	// audience is the receipts' audience, as the claims' answers name it.
	audience string
	wg       sync.WaitGroup
}

const approverID = "adjuster-17"

func newApprover(c client.Client, cli, address string, cliEnv []string, prefix string, plan []plannedClaim, within time.Duration, key authority.KeyFile, queue *store.Store, log *slog.Logger) *approver {
	byID := make(map[string]plannedClaim, len(plan))
	for _, p := range plan {
		byID[p.Claim.ID] = p
	}
	return &approver{client: c, cli: cli, address: address, cliEnv: cliEnv, prefix: prefix, plan: byID, within: within, key: key,
		queue: queue, log: log, sem: make(chan struct{}, 4), book: map[string]*decision{}}
}

// watch polls visibility for this run's waiting claims until ctx ends, and
// starts a decider for each one it has not seen. Visibility, not the status
// query: it costs no workflow task, and ClaimStatus=waiting is upserted in
// the same task that opens the approval, so a claim listed is open.
func (a *approver) watch(ctx context.Context) {
	defer a.wg.Wait()
	for {
		ids, err := a.waiting(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Debug("listing waiting claims failed; retrying", "error", err)
		}
		for _, id := range ids {
			if d := a.track(id); d != nil {
				a.wg.Add(1)
				go func() { defer a.wg.Done(); a.decide(ctx, d) }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (a *approver) waiting(ctx context.Context) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := a.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", PageSize: 1000, NextPageToken: token,
			Query: fmt.Sprintf(`WorkflowId STARTS_WITH %q AND ClaimStatus = %q`, a.prefix, workflows.StatusWaiting),
		})
		if err != nil {
			return ids, err
		}
		for _, ex := range resp.GetExecutions() {
			ids = append(ids, ex.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}

// track records a newly seen waiting claim; nil if already tracked.
func (a *approver) track(id string) *decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.book[id]; seen {
		return nil
	}
	p, ok := a.plan[id]
	if !ok {
		return nil // not this run's: cannot happen with the run's prefix
	}
	d := &decision{ClaimID: id, Verdict: p.Verdict, Approver: approverID, SeenWaitingAt: time.Now()}
	if d.Verdict == string(approvals.Reject) {
		d.Reason = "soak: the invoice does not match the reported damage"
	}
	a.book[id] = d
	return d
}

// decide waits a random while, sends the decision, and sends it again until
// the claim shows it decided.
func (a *approver) decide(ctx context.Context, d *decision) {
	if a.gate != nil {
		if g := a.gate(d.ClaimID); g != nil {
			select {
			case <-g:
			case <-ctx.Done():
				return
			}
		}
	}
	if !sleep(ctx, time.Duration(rand.Int64N(int64(a.within)+1))) {
		return
	}
	for {
		sentAt := time.Now()
		if err := a.send(ctx, d); err != nil {
			return
		}
		why, again := a.awaitDecided(ctx, d, sentAt)
		if !again {
			return
		}
		if d.Resends >= maxResends {
			// A decision refused for a reason that does not pass (a rule the
			// approver breaks) would be refused forever; verification
			// reports the claim.
			a.log.Warn("decision still not taken; giving up", "claim", d.ClaimID, "verdict", d.Verdict, "why", why)
			return
		}
		a.mu.Lock()
		d.Resends++
		d.ResendWhy = append(d.ResendWhy, why)
		a.mu.Unlock()
		a.log.Info("decision not taken; sending it again", "claim", d.ClaimID, "verdict", d.Verdict, "why", why)
	}
}

// send runs `temporal workflow signal` with a receipt signed for the
// request the claim shows, until it succeeds: a failure (the server
// restarting, a timeout) is retried, as an adjuster would.
func (a *approver) send(ctx context.Context, d *decision) error {
	var args []string
	for args == nil {
		request, audience := a.request(ctx, d)
		if request != "" {
			r, err := approvals.NewReceipt(approvals.Receipt{Subject: d.Approver, ClaimID: d.ClaimID, RequestSHA256: request,
				Verdict: approvals.Verdict(d.Verdict), Reason: d.Reason, Note: "soak " + d.Verdict, Audience: audience}, time.Now(), approvals.DefaultReceiptTTL)
			if err != nil {
				return err
			}
			tok, err := approvals.Sign(a.key, r)
			if err != nil {
				return err
			}
			payload, _ := json.Marshal(approvals.Input{Receipt: tok})
			args = []string{"workflow", "signal", "--address", a.address, "--namespace", "default",
				"--workflow-id", d.ClaimID, "--name", d.Verdict, "--input", string(payload)}
			break
		}
		// No worker to answer the query yet (one was just killed): the
		// adjuster reads the request again a moment later.
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	for {
		out, err := a.runCLI(ctx, args)
		a.mu.Lock()
		if err == nil {
			d.Sends++
			if d.FirstSentAt.IsZero() {
				d.FirstSentAt = time.Now()
			}
		} else {
			d.CLIFailures++
		}
		a.mu.Unlock()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Debug("temporal workflow signal failed; retrying", "claim", d.ClaimID, "error", err, "output", strings.TrimSpace(out))
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// request is the hash of the request the claim awaits a decision on, and
// the audience its receipts carry; "" when it cannot be read yet. The
// claim's status query says, when the claim can answer it. A build that
// cannot replay the run cannot: the rollout rehearsal's v3, whose new first
// step blocks the replay before the workflow registers its queries, fails
// the query ("unknown queryType status"), or a query replays less strictly
// than a workflow task and answers without the approval. The adjuster then
// reads the request from the approval queue, as the inbox's list does (the
// workflow checks the receipt's hash itself). A query nobody answered (no
// worker alive, one just killed) is only retried.
func (a *approver) request(ctx context.Context, d *decision) (request, audience string) {
	st, err := a.status(ctx, d.ClaimID)
	var failed *serviceerror.QueryFailed
	switch {
	case err == nil && st.Approval != nil:
		a.mu.Lock()
		if st.Audience != "" {
			a.audience = st.Audience
		}
		a.mu.Unlock()
		return st.Approval.RequestSHA256, st.Audience
	case err != nil && !errors.As(err, &failed), a.queue == nil:
		return "", ""
	}
	request = a.queued(ctx, d.ClaimID)
	a.mu.Lock()
	defer a.mu.Unlock()
	if request == "" || a.audience == "" {
		return "", "" // nothing queued yet, or no claim has named the audience
	}
	if !d.FromQueue {
		why := "answered without its approval"
		if err != nil {
			why = err.Error()
		}
		a.log.Info("the claim cannot answer its status query; deciding from the approval queue", "claim", d.ClaimID, "why", why)
	}
	d.FromQueue = true
	return request, a.audience
}

// queued reads the request hash of claim id's open wait from the approval
// queue; "" if it holds none.
func (a *approver) queued(ctx context.Context, id string) string {
	var after *store.QueueCursor
	for {
		es, err := a.queue.ApprovalQueue(ctx, store.QueueFilter{}, after, 500)
		if err != nil || len(es) == 0 {
			return ""
		}
		for _, e := range es {
			if e.ClaimID != id {
				continue
			}
			var l approvals.Approval
			if json.Unmarshal(e.Summary, &l) != nil {
				return ""
			}
			return l.RequestSHA256
		}
		c := store.CursorAfter(es[len(es)-1])
		after = &c
	}
}

func (a *approver) runCLI(ctx context.Context, args []string) (string, error) {
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.sem }()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.cli, args...)
	cmd.Env = childEnv(a.cliEnv...) // the cluster's token, if it needs one
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// maxResends bounds how often one decision is sent again.
const maxResends = 5

// resendAfter is the safety net for a decision the claim never shows: long
// enough for a killed worker's task to time out and be redone.
const resendAfter = 30 * time.Second

// awaitDecided polls the status query until the claim's approval carries a
// decision, and says whether (and why) to send it again. The query's State
// is not enough: after a rejection it stays "waiting" until steps 7–9 are
// done, and re-sending then would only add a refusal. A resend needs
// evidence from the claim itself: a decision of ours sent after sentAt that
// it refused (it landed when the claim was not waiting), or an answer,
// resendAfter after the send, that still shows no decision. A query that
// fails (no worker alive to answer, the server restarting) is no evidence,
// so it is only retried: queries see every signal the server took before
// them, so a blind resend would only ever add a refusal.
func (a *approver) awaitDecided(ctx context.Context, d *decision, sentAt time.Time) (why string, again bool) {
	for sleep(ctx, time.Second) {
		st, err := a.status(ctx, d.ClaimID)
		if err != nil || st.Approval == nil {
			// No answer, or one without the approval the claim has (a
			// build that cannot replay it answered, see request): no
			// evidence either way.
			if closed, _ := a.closed(ctx, d.ClaimID); closed {
				a.markDecided(d)
				return "", false
			}
			continue
		}
		refused := refusedSince(st.Attempts, d.Approver, sentAt)
		switch {
		case st.Approval != nil && st.Approval.Decision != nil:
			a.markDecided(d)
			return "", false
		case refused != "":
			return "refused: " + refused, true
		case time.Since(sentAt) > resendAfter:
			return fmt.Sprintf("no decision %s after the send (state %s, step %d)", resendAfter, st.State, st.Step), true
		}
	}
	return "", false
}

// refusedSince returns the refusal of a decision by approver recorded after
// since, or "".
func refusedSince(attempts []approvals.Attempt, approver string, since time.Time) string {
	for _, at := range attempts {
		// Workflow time runs on the server's clock, the same machine's:
		// a second of slack covers the rounding of event times.
		if !at.Accepted && at.Approver == approver && at.At.After(since.Add(-time.Second)) {
			return at.Refusal
		}
	}
	return ""
}

func (a *approver) markDecided(d *decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d.DecidedSeenAt = time.Now()
}

func (a *approver) status(ctx context.Context, id string) (workflows.Status, error) {
	var st workflows.Status
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := a.client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

func (a *approver) closed(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := a.client.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return false, err
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// decisions is a copy of the book, for verification and the summary.
func (a *approver) decisions() map[string]decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]decision, len(a.book))
	for id, d := range a.book {
		out[id] = *d
	}
	return out
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
