package whatif

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/workflows"
)

// Names a what-if runs under: its own task queue and workflow types, which
// no claim worker serves.
const (
	// TaskQueuePrefix: each what-if has its own task queue, served only
	// by the worker of the process that runs it (TaskQueue).
	TaskQueuePrefix   = "claims-whatif."
	WorkflowName      = "WhatIfWorkflow"
	ClaimWorkflowName = "WhatIfClaimWorkflow"
	// QueryProgress answers Progress while the what-if runs.
	QueryProgress = "progress"
	// batch is how many claims a run of the what-if starts before it
	// continues as new, so its history stays small whatever the sample
	// (each claim's row, its tool answers trimmed, is in it).
	batch = 200
	// MaxClaims bounds one what-if's sample: its input and its result
	// carry the IDs.
	MaxClaims = 10_000
	// maxToolContent is how much of a tool's answer a row keeps: the
	// rows go into the what-if's own history, and the report shows a
	// tool's source, not its text.
	maxToolContent = 256
)

// Candidate names what is being tried: the model and prompt version the
// what-if worker must be running, and the insurer policy (nil: each claim's
// recorded one).
type Candidate struct {
	Model         string         `json:"model"`
	PromptVersion string         `json:"prompt_version"`
	Policy        *insurer.Rules `json:"policy,omitempty"`
	PolicyVersion string         `json:"policy_version,omitempty"`
}

// Input is a what-if: the claims, the candidate, the pace and the budget.
type Input struct {
	ClaimIDs  []string  `json:"claim_ids"`
	Candidate Candidate `json:"candidate"`
	// Concurrency is how many claims are evaluated at once (default 4).
	Concurrency int `json:"concurrency,omitempty"`
	// SpendCapMicros stops starting claims once the candidate's spend
	// reaches it (0: no cap); the claims in flight finish.
	SpendCapMicros int64 `json:"spend_cap_micros,omitempty"`
	// Progress is carried from one run of the what-if to the next.
	Progress Progress `json:"progress"`
}

// Progress is how far a what-if is.
type Progress struct {
	Total     int `json:"total"`
	Started   int `json:"started"`
	Evaluated int `json:"evaluated"`
	Changed   int `json:"changed"`
	Dangerous int `json:"dangerous"`
	// NotEvaluated counts claims that could not be (no claim file, the
	// candidate failed): their rows say why.
	NotEvaluated int   `json:"not_evaluated"`
	SpentMicros  int64 `json:"spent_micros"`
	// StoppedBySpend: the spend cap stopped the what-if before every claim
	// was started; the rest are listed as not started.
	StoppedBySpend bool `json:"stopped_by_spend,omitempty"`
}

// Done counts the claims finished either way.
func (p Progress) Done() int { return p.Evaluated + p.NotEvaluated }

// Summary is a finished what-if: its claims and how far it got. Each
// started claim's row is its claim workflow's result (ClaimRunID).
type Summary struct {
	ClaimIDs   []string  `json:"claim_ids"`
	Candidate  Candidate `json:"candidate"`
	NotStarted []string  `json:"not_started,omitempty"`
	Progress
}

// TaskQueue is a what-if's own task queue.
func TaskQueue(whatIf string) string { return TaskQueuePrefix + whatIf }

// ClaimRunID is the workflow ID of a what-if's claim: <what-if>/<claim>.
func ClaimRunID(whatIf, claimID string) string { return whatIf + "/" + claimID }

// Register puts the what-if's workflows and activities on a worker.
func Register(w interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
	RegisterActivity(any)
}, a *Activities) {
	w.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterWorkflowWithOptions(ClaimWorkflow, workflow.RegisterOptions{Name: ClaimWorkflowName})
	w.RegisterActivity(a)
}

// Workflow runs a what-if: one claim workflow per claim, Concurrency at a
// time, until every claim is started or the spend cap is reached.
func Workflow(ctx workflow.Context, in Input) (Summary, error) {
	if len(in.ClaimIDs) == 0 || len(in.ClaimIDs) > MaxClaims {
		return Summary{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim_ids: %d claims; a what-if takes 1 to %d", len(in.ClaimIDs), MaxClaims), "WhatIfInput", nil)
	}
	if in.Concurrency <= 0 {
		in.Concurrency = 4
	}
	p := in.Progress
	p.Total = len(in.ClaimIDs)
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) { return p, nil }); err != nil {
		return Summary{}, err
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowExecutionTimeout: 24 * time.Hour})
	sel := workflow.NewSelector(ctx)
	inFlight, startedHere := 0, 0
	overBudget := func() bool { return in.SpendCapMicros > 0 && p.SpentMicros >= in.SpendCapMicros }
	for {
		for inFlight < in.Concurrency && p.Started < p.Total && startedHere < batch && !overBudget() {
			claimID := in.ClaimIDs[p.Started]
			p.Started++
			startedHere++
			inFlight++
			f := workflow.ExecuteChildWorkflow(workflow.WithWorkflowID(cctx, ClaimRunID(id, claimID)), ClaimWorkflowName,
				ClaimInput{ClaimID: claimID, Candidate: in.Candidate})
			sel.AddFuture(f, func(f workflow.Future) {
				inFlight--
				var row Row
				if err := f.Get(ctx, &row); err != nil {
					row = Row{ClaimID: claimID, Error: err.Error()}
				}
				p.count(row)
			})
		}
		if inFlight == 0 {
			break
		}
		sel.Select(ctx)
	}
	p.StoppedBySpend = p.Started < p.Total && overBudget()
	if p.Started < p.Total && !p.StoppedBySpend {
		in.Progress = p
		return Summary{}, workflow.NewContinueAsNewError(ctx, WorkflowName, in)
	}
	return Summary{ClaimIDs: in.ClaimIDs, Candidate: in.Candidate, NotStarted: in.ClaimIDs[p.Started:], Progress: p}, nil
}

func (p *Progress) count(r Row) {
	p.SpentMicros += r.Now.Usage.CostMicros
	if r.Error != "" {
		p.NotEvaluated++
		return
	}
	p.Evaluated++
	if r.Changed {
		p.Changed++
	}
	if r.Dangerous {
		p.Dangerous++
	}
}

// ClaimInput is one claim of a what-if.
type ClaimInput struct {
	ClaimID   string    `json:"claim_id"`
	Candidate Candidate `json:"candidate"`
}

// Row is one claim's comparison: what the rules made of the recorded
// answers then, and of the candidate's now.
type Row struct {
	ClaimID string `json:"claim_id"`
	// Error says why the claim was not evaluated ("" when it was).
	Error string `json:"error,omitempty"`
	// Outcome is how the recorded run ended; Human what its approvers did.
	Outcome  string `json:"outcome,omitempty"`
	Human    *Human `json:"human,omitempty"`
	Currency string `json:"currency,omitempty"`
	Then     Side   `json:"then"`
	Now      Side   `json:"now"`
	// PaidThenMinor is what the run paid; PayoutNowMinor what the candidate
	// would pay without a human, or propose to one (Now.Route.Route human).
	PaidThenMinor  int64 `json:"paid_then_minor"`
	PayoutNowMinor int64 `json:"payout_now_minor"`
	// Changed: the route, the payout or the review reasons differ.
	// Dangerous: a human intervened then (lowered, rejected, handed on)
	// and the candidate would pay without one.
	Changed        bool     `json:"changed"`
	Dangerous      bool     `json:"dangerous,omitempty"`
	ReasonsAdded   []string `json:"reasons_added,omitempty"`
	ReasonsDropped []string `json:"reasons_dropped,omitempty"`
	// Note says why a row evaluated was not compared.
	Note string `json:"note,omitempty"`
}

// Side is one side of the comparison.
type Side struct {
	Route      workflows.Route        `json:"route"`
	Triage     *activities.Triage     `json:"triage,omitempty"`
	Assessment *activities.Assessment `json:"assessment,omitempty"`
	Coverage   claim.Coverage         `json:"coverage"`
	Flags      []string               `json:"flags,omitempty"`
	Tools      []ToolAnswer           `json:"tools,omitempty"`
	Usage      Usage                  `json:"usage"`
}

// a is the nil receiver the workflows name activities by.
var a *Activities

// ClaimWorkflow evaluates one recorded claim under the candidate.
func ClaimWorkflow(ctx workflow.Context, in ClaimInput) (Row, error) {
	row := Row{ClaimID: in.ClaimID}
	// The worker heartbeats every activity (worker/heartbeat): a killed
	// what-if worker's calls are retried by the next in seconds.
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 2 * time.Minute, HeartbeatTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 8}})
	var rec Recorded
	if err := workflow.ExecuteActivity(actx, a.LoadRecorded, in.ClaimID).Get(ctx, &rec); err != nil {
		row.Error = "not evaluated: " + rootCause(err)
		return row, nil
	}
	row.Outcome, row.Human, row.Currency, row.PaidThenMinor = rec.Outcome, rec.Human, rec.Claim.Currency, rec.PayoutMinor
	row.Then = thenSide(rec)

	now, err := candidate(ctx, actx, rec, in.Candidate, &row.Now)
	if err != nil {
		row.Error = "not evaluated: " + rootCause(err)
		return row, nil
	}
	row.Now.Route = now
	if now.Route == workflows.RouteAutoApprove || now.Route == workflows.RouteHuman {
		row.PayoutNowMinor = now.PayoutMinor
	}
	compare(&row)
	row.Then.Tools, row.Now.Tools = trimmed(row.Then.Tools), trimmed(row.Now.Tools)
	return row, nil
}

// trimmed keeps the start of each tool answer (maxToolContent).
func trimmed(tools []ToolAnswer) []ToolAnswer {
	out := slices.Clone(tools)
	for i := range out {
		if len(out[i].Content) > maxToolContent {
			out[i].Content = strings.ToValidUTF8(out[i].Content[:maxToolContent], "") + "…"
		}
	}
	return out
}

// thenSide is what the rules made of the recorded answers under the
// recorded policy: the route the run took (unknown when it stopped before
// the model answered).
func thenSide(rec Recorded) Side {
	s := Side{Triage: rec.Triage, Assessment: rec.Assessment, Coverage: rec.Coverage, Flags: rec.Flags, Tools: rec.Tools, Usage: rec.Usage}
	if rec.Triage == nil || (rec.Coverage.Covered && rec.Assessment == nil) {
		return s
	}
	rt, err := workflows.RouteClaim(workflows.RouteInput{Claim: rec.Claim, Rules: rec.Rules, Options: rec.Options, Review: rec.Review,
		Flags: rec.Flags, Triage: *rec.Triage, Coverage: rec.Coverage, Assessment: rec.Assessment})
	if err == nil {
		s.Route = rt
	}
	return s
}

// candidate runs steps 2–5 on the recorded claim with the candidate's
// answers: the triage loop (tools answered from the recording where the
// same call was recorded, read-only otherwise), coverage, assessment and
// the routing rules under rules.
func candidate(ctx, actx workflow.Context, rec Recorded, want Candidate, s *Side) (workflows.Route, error) {
	rules := rec.Rules
	if want.Policy != nil {
		rules = want.Policy
	}
	c := rec.Claim
	maxTurns, maxTokens, err := workflows.TriageCaps(rules, rec.Options, c.Currency)
	if err != nil {
		return workflows.Route{}, fmt.Errorf("the candidate policy: %w", err)
	}
	if maxTurns <= 0 {
		maxTurns = workflows.DefaultMaxTriageTurns
	}
	if maxTokens <= 0 {
		maxTokens = workflows.DefaultMaxTriageTokens
	}
	recorded := map[string]ToolAnswer{}
	for _, t := range rec.Tools {
		if k := toolKey(t.Name, t.Arguments); recorded[k].Name == "" {
			recorded[k] = t
		}
	}
	var msgs []model.Message
	var results []model.Message
	var tokens int64
	var triage activities.Triage
	for turn := 1; ; turn++ {
		if turn > maxTurns || tokens >= maxTokens {
			triage = activities.ReviewTriage(fmt.Sprintf("triage stopped: the candidate did not answer within the caps (%d turns, %d tokens)", maxTurns, maxTokens))
			break
		}
		msgs = append(msgs, results...)
		results = nil
		var res TurnResult
		if err := workflow.ExecuteActivity(actx, a.Turn, TurnInput{Claim: c, Turn: turn, Final: turn == maxTurns, Messages: msgs}).Get(ctx, &res); err != nil {
			return workflows.Route{}, err
		}
		if err := want.check(res.Answer); err != nil {
			return workflows.Route{}, err
		}
		s.Usage.addAnswer(res.Answer)
		tokens += res.Usage.TokensIn + res.Usage.TokensOut
		msgs = append(msgs, res.Turn.Messages...)
		if res.Turn.Triage != nil {
			triage = *res.Turn.Triage
			break
		}
		if len(res.Turn.ToolCalls) == 0 {
			triage = activities.ReviewTriage(fmt.Sprintf("triage turn %d neither answered nor asked for a tool", turn))
			break
		}
		for i, call := range res.Turn.ToolCalls {
			var ans ToolAnswer
			switch t, ok := recorded[toolKey(call.Name, call.Arguments)]; {
			case i >= activities.MaxToolCallsPerTurn:
				ans = ToolAnswer{Name: call.Name, Arguments: call.Arguments, IsError: true, Source: SourceSimulated,
					Content: fmt.Sprintf(`{"error":"at most %d tool calls per turn"}`, activities.MaxToolCallsPerTurn)}
			case ok:
				ans = t
				ans.Source = SourceRecorded
			default:
				if err := workflow.ExecuteActivity(actx, a.Tool, ToolInput{ClaimID: c.ID, Call: call, Scope: activities.ScopeOf(c)}).Get(ctx, &ans); err != nil {
					return workflows.Route{}, err
				}
			}
			s.Tools = append(s.Tools, ans)
			if call.Name == activities.ToolFlagFraudSignal && !ans.IsError {
				s.Flags = append(s.Flags, flagged(ans.Content))
			}
			results = append(results, model.Message{Role: "tool", ToolCallID: call.ID, Name: call.Name, Content: ans.Content})
		}
	}
	s.Triage = &triage
	s.Coverage = claim.Cover(rec.Policy, c, triage.Category)
	if s.Coverage.Covered {
		var as AssessResult
		if err := workflow.ExecuteActivity(actx, a.Assess, model.AssessRequest{Claim: c, Triage: triage, Coverage: s.Coverage}).Get(ctx, &as); err != nil {
			return workflows.Route{}, err
		}
		if err := want.check(as.Answer); err != nil {
			return workflows.Route{}, err
		}
		s.Usage.addAnswer(as.Answer)
		s.Assessment = &as.Assessment
	}
	rt, err := workflows.RouteClaim(workflows.RouteInput{Claim: c, Rules: rules, Options: rec.Options, Review: rec.Review,
		Flags: s.Flags, Triage: triage, Coverage: s.Coverage, Assessment: s.Assessment})
	if err != nil {
		return workflows.Route{}, fmt.Errorf("the candidate policy: %w", err)
	}
	return rt, nil
}

// check refuses an answer of another model or prompt than the what-if
// names: a worker started with another candidate answered it.
func (c Candidate) check(an Answer) error {
	if an.Model != c.Model || an.PromptVersion != c.PromptVersion {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the what-if tries %s (prompt %s) but its worker answered with %s (prompt %s)",
			c.Model, c.PromptVersion, an.Model, an.PromptVersion), "WhatIfCandidate", nil)
	}
	return nil
}

func (u *Usage) addAnswer(an Answer) {
	u.Model, u.PromptVersion = an.Model, an.PromptVersion
	u.Calls++
	u.TokensIn += an.Usage.TokensIn
	u.TokensOut += an.Usage.TokensOut
	u.CostMicros += an.Usage.CostMicros
	u.Latency += an.Latency
	u.LatencyKnown = true
}

// toolKey identifies a tool call by its name and its arguments as JSON
// values, so key order and spacing do not matter.
func toolKey(name, args string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber() // 2^53 + 1 stays itself
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			args = string(b)
		}
	}
	return name + "\x00" + args
}

// compare fills in what changed between then and now. Reasons count by
// the rule they come from (review.Kind), not their words: a model
// that phrases its review reason or its fraud signals otherwise but sends
// the claim the same way changed nothing. A recorded route that is not
// known (the run's triage ended by a cap inside the workflow, or the run
// stopped before the model answered) is not compared: the row says so.
func compare(r *Row) {
	then, now := r.Then.Route, r.Now.Route
	if then.Route == "" {
		r.Note = "not compared: the recorded run's route is not in its claim file (its triage ended at a cap, or it stopped before the model answered)"
		return
	}
	kinds := func(reasons []string) []string {
		var out []string
		for _, x := range reasons {
			out = append(out, review.Kind(x))
		}
		return out
	}
	thenKinds, nowKinds := kinds(then.Reasons), kinds(now.Reasons)
	for i, x := range now.Reasons {
		if !slices.Contains(thenKinds, nowKinds[i]) {
			r.ReasonsAdded = append(r.ReasonsAdded, x)
		}
	}
	for i, x := range then.Reasons {
		if !slices.Contains(nowKinds, thenKinds[i]) {
			r.ReasonsDropped = append(r.ReasonsDropped, x)
		}
	}
	r.Changed = then.Route != now.Route || then.PayoutMinor != now.PayoutMinor || len(r.ReasonsAdded)+len(r.ReasonsDropped) > 0
	r.Dangerous = now.Route == workflows.RouteAutoApprove && r.Human.Intervened()
}

// rootCause is the message of the error at the bottom of an activity's
// failure, without the wrapping every layer adds.
func rootCause(err error) string {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err.Error()
		}
		err = u.Unwrap()
	}
}
