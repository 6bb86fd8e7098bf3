package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/internal/statute"
)

// ClaimSuite drives ClaimWorkflow with mocked activities and a skipping
// clock: a 72-hour TTL passes in milliseconds.
type ClaimSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env   *testsuite.TestWorkflowEnvironment
	calls *calls
}

func TestClaimWorkflow(t *testing.T) { suite.Run(t, new(ClaimSuite)) }

// calls records what each mocked activity was asked to do.
type calls struct {
	mu        sync.Mutex
	keys      map[string][]claim.IdempotencyKey
	pays      []activities.PayInput
	notices   []activities.NotifyInput
	closes    []activities.CloseInput
	audits    []AuditRecord
	escalated []activities.NoticeInput
	reminded  []activities.NoticeInput
	loads     int
	sa        []map[string]any
	queue     []activities.QueueInput

	// Knobs a test sets before start.
	loadStatus string
	// loadErr fails every read of the claim.
	loadErr error
	payErr  error
	// notifyErr fails every attempt of the claimant's e-mail.
	notifyErr error
	// reread changes the claim the system of record returns from the
	// second read on (after an approval wait).
	reread func(*activities.LoadClaimResult)
	// revoked are key IDs the directory no longer lists: a read that asks
	// about them names them Revoked, as LoadClaim does.
	revoked   []string
	approvers authority.Directory
	// rules is the worker's policy intake records (default: the defaults);
	// review what intake found for the review rules (default: nothing).
	rules  *insurer.Rules
	review *review.Facts
	tokens int64
	// model, when set, answers the triage turns instead of the rules.
	model activities.Model
	// acts, when set, runs the triage turns and the assessment for real
	// (failover_test.go): its models, its store, Temporal's retries.
	acts *activities.Activities
	// budgetWaits is how many model calls (turns and assessments) hand a
	// wait for capacity back before any answers; budgetAttempt the attempt
	// each says handed it back (default 1).
	budgetWaits   int
	budgetAttempt int32
	// budgetWaitFor is the wait each hands back (default 5 minutes).
	budgetWaitFor time.Duration
	// modelDownUntil and stripeDownUntil: until then (the test clock) the
	// assessment and the payment find their dependency down and hand the
	// wait back (DependencyDown), as the activities do after their first
	// attempts.
	modelDownUntil, stripeDownUntil time.Time
	// escalateFails is how many attempts of the escalation notice fail
	// (a mail relay that is down) before one succeeds.
	escalateFails int
	// escalateErr fails every attempt of the escalation notice.
	escalateErr error

	// law is the jurisdiction intake records (default: none); letters
	// the claimant's letters sent (each rendered for real), overdue the
	// overdue notices.
	law *statute.Recorded
	// recommendNothing: the assessment recommends paying nothing;
	// statusLetterErr and ackLetterErr fail every status letter and
	// every acknowledgment.
	recommendNothing bool
	statusLetterErr  error
	ackLetterErr     error
	letters          []activities.SentLetter
	overdue          []activities.NoticeInput
	claim            claim.Claim
	// onLoad runs as the nth read of the claim begins; onQueue as a write
	// to the approval queue begins (both on the local activity's goroutine).
	onLoad  func(n int)
	onQueue func(activities.QueueInput)
}

// sendLetter renders a letter for real, as the activity does, and keeps it.
func (c *calls) sendLetter(now time.Time, key claim.IdempotencyKey, f activities.LetterFacts) (activities.SentLetter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := activities.RenderLetter(c.claim, f, now)
	if err != nil {
		return activities.SentLetter{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
	}
	sent := activities.SentLetter{Kind: l.Kind, SentAt: now.UTC(), Version: l.Version, SHA256: l.SHA256, MessageID: string(key),
		Subject: l.Subject, Body: l.Body}
	c.letters = append(c.letters, sent)
	return sent, nil
}

// dependencyDownErr is what a step hands back after its first attempts
// found dep down (activities/outage.go): on its second attempt.
func dependencyDownErr(dep string) error {
	return temporal.NewNonRetryableApplicationError(dep+" unavailable (attempt 2): 503", activities.ErrDependencyDown, nil, dep, int32(2))
}

// budgetWait hands a wait back (5 minutes unless budgetWaitFor), while the knob says so, to a
// model step whose workflow waits for capacity itself.
func (c *calls) budgetWait(waits bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !waits || c.budgetWaits == 0 {
		return nil
	}
	c.budgetWaits--
	wait := c.budgetWaitFor
	if wait == 0 {
		wait = 5 * time.Minute
	}
	return temporal.NewNonRetryableApplicationError("no model capacity for "+wait.String(), activities.ErrModelBudgetWait, nil, wait, max(c.budgetAttempt, 1))
}

func (c *calls) add(name string, key claim.IdempotencyKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[name] = append(c.keys[name], key)
}

// activityBuild is the build the mocked model activities say asked.
const activityBuild = "activity-build-1"

// one is the Meta of an activity that succeeded at its first attempt.
var one = activities.Meta{Attempt: 1}

var policies = map[string]claim.Policy{
	"pol-1001": {ID: "pol-1001", Currency: "usd", LimitMinor: 1_000_000, DeductibleMinor: 0},
	"pol-2002": {ID: "pol-2002", Currency: "usd", LimitMinor: 150_000, DeductibleMinor: 25_000, ExcludedCategories: []string{"wear-and-tear"}},
}

// suiteRules is the worker's policy the suite's intake records by default:
// the defaults, for claims under no jurisdiction's rules, whose unanswered
// waits expire as they did before the law (law_test.go runs the law's).
func suiteRules() insurer.Rules {
	r := insurer.Defaults()
	r.FinalOutcome = "reject"
	return r
}

func testClaim(id, amount string) claim.Claim {
	c, err := claim.File{ClaimID: id, PolicyID: "pol-1001",
		Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"},
		Amount:   amount, Currency: "usd", Description: "Burst pipe flooded the kitchen floor",
		Documents: []claim.Document{{Name: "photo.jpg", Path: "blob://0042/photo.jpg"}}}.Claim()
	if err != nil {
		panic(err)
	}
	return c
}

func (s *ClaimSuite) SetupSuite() {
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
}

func (s *ClaimSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflow(ClaimWorkflow)
	s.env.RegisterWorkflowWithOptions(onTwoBuilds, workflow.RegisterOptions{Name: "ClaimWorkflowOnTwoBuilds"})
	s.calls = &calls{keys: map[string][]claim.IdempotencyKey{}}
	c := s.calls
	rules := activities.RulesModel{}
	env := s.env

	env.OnActivity(a.LoadClaim, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.LoadClaimInput) (activities.LoadClaimResult, error) {
			c.add("load", "")
			c.mu.Lock()
			c.loads++
			n := c.loads
			c.mu.Unlock()
			if c.onLoad != nil {
				c.onLoad(n)
			}
			if c.loadErr != nil {
				return activities.LoadClaimResult{}, c.loadErr
			}
			res := activities.LoadClaimResult{Claim: in.Claim, Status: "open", Version: 1, Law: c.law, Meta: one}
			if c.loadStatus != "" {
				res.Status = c.loadStatus
			}
			if n > 1 && c.reread != nil {
				c.reread(&res)
			}
			for _, kid := range in.Keys {
				if slices.Contains(c.revoked, kid) {
					res.Revoked = append(res.Revoked, kid)
				}
			}
			if p, ok := policies[res.Claim.PolicyID]; ok {
				res.Policy = &p
			}
			rules := suiteRules()
			if c.rules != nil {
				rules = *c.rules
			}
			res.Rules, res.PolicyVersion = &rules, rules.Version()
			c.mu.Lock()
			c.claim = res.Claim
			c.mu.Unlock()
			res.Review = c.review
			return res, nil
		})
	env.OnActivity(a.TriageClaim, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TriageInput) (activities.TriageResult, error) {
			c.add("triage", in.Key)
			r, err := rules.Triage(ctx, in.Claim)
			out, u := r.Output, r.Usage
			if c.tokens > 0 {
				u.TokensIn = c.tokens
			}
			return activities.TriageResult{Output: out, Model: rules.Name(), PromptVersion: rules.PromptVersion(), BuildID: activityBuild,
				Usage: u, OutputSHA256: "triage-sha", Meta: one}, err
		})
	env.OnActivity(a.TriageTurn, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			c.add("triage", in.Key)
			if c.acts != nil {
				return c.acts.TriageTurn(ctx, in)
			}
			if err := c.budgetWait(in.WaitsForBudget); err != nil {
				return activities.TurnResult{}, err
			}
			msgs := append([]activities.Message(nil), in.Conversation.Messages...)
			for _, t := range in.ToolResults {
				msgs = append(msgs, activities.Message{Role: "tool", ToolCallID: t.CallID, Name: t.Name, Content: t.Content})
			}
			c.mu.Lock()
			model := c.model
			c.mu.Unlock()
			if model == nil {
				model = rules
			}
			r, err := model.TriageTurn(ctx, activities.TurnRequest{Claim: in.Claim, Turn: in.Turn, Messages: msgs, Final: in.Final})
			u := r.Usage
			if c.tokens > 0 {
				u.TokensIn = c.tokens
			}
			_, det := model.(activities.Deterministic)
			return activities.TurnResult{ToolCalls: r.Output.ToolCalls, Triage: r.Output.Triage, Model: model.Name(), PromptVersion: model.PromptVersion(),
				BuildID: activityBuild, Usage: u, Deterministic: det, Conversation: activities.Conversation{Messages: append(msgs, r.Output.Messages...)},
				OutputSHA256: fmt.Sprintf("turn%d-sha", in.Turn), Meta: one}, err
		})
	env.OnActivity(a.CallTool, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ToolInput) (activities.ToolResult, error) {
			c.add("tool", in.Key)
			content := `{"ok":true}`
			if in.Call.Name == activities.ToolFlagFraudSignal {
				var args map[string]string
				_ = json.Unmarshal([]byte(in.Call.Arguments), &args)
				b, _ := json.Marshal(map[string]any{"flagged": true, "signal": args["signal"]})
				content = string(b)
			}
			return activities.ToolResult{CallID: in.Call.ID, Name: in.Call.Name, Content: content, Meta: one}, nil
		})
	env.OnActivity(a.AssessClaim, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AssessInput) (activities.AssessResult, error) {
			c.add("assess", in.Key)
			if c.acts != nil {
				return c.acts.AssessClaim(ctx, in)
			}
			if err := c.budgetWait(in.WaitsForBudget); err != nil {
				return activities.AssessResult{}, err
			}
			if env.Now().Before(c.modelDownUntil) {
				return activities.AssessResult{}, dependencyDownErr(activities.DependencyModel)
			}
			r, err := rules.Assess(ctx, in.AssessRequest)
			out, u := r.Output, r.Usage
			if c.recommendNothing {
				out.RecommendedMinor = 0
			}
			// The assessment is free to repeat as the turns are: when the
			// run's model is (the rules, the default).
			c.mu.Lock()
			model := c.model
			c.mu.Unlock()
			_, det := model.(activities.Deterministic)
			return activities.AssessResult{Output: out, Model: rules.Name(), PromptVersion: rules.PromptVersion(), BuildID: activityBuild,
				Usage: u, OutputSHA256: "assess-sha", Deterministic: model == nil || det, Meta: one}, err
		})
	env.OnActivity(a.PayClaimant, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PayInput) (activities.PayResult, error) {
			c.add("pay", in.Key)
			if c.payErr != nil {
				return activities.PayResult{}, c.payErr
			}
			if env.Now().Before(c.stripeDownUntil) {
				return activities.PayResult{}, dependencyDownErr(activities.DependencyStripe)
			}
			c.mu.Lock()
			c.pays = append(c.pays, in)
			c.mu.Unlock()
			return activities.PayResult{TransferID: "tr_1", AmountMinor: in.AmountMinor, Currency: in.Currency, Destination: in.Destination,
				CreatedAt: env.Now().UTC().Truncate(time.Second), Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.NotifyClaimant, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
			c.add("notify", in.Key)
			if c.notifyErr != nil {
				return activities.NotifyResult{}, c.notifyErr
			}
			c.mu.Lock()
			c.notices = append(c.notices, in)
			c.mu.Unlock()
			if in.Letter != nil {
				l, err := c.sendLetter(env.Now(), in.Key, *in.Letter)
				return activities.NotifyResult{MessageID: l.MessageID, Letter: &l, Meta: one}, err
			}
			return activities.NotifyResult{MessageID: "m1", Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.CloseClaim, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CloseInput) (activities.CloseResult, error) {
			c.add("close", in.Key)
			c.mu.Lock()
			c.closes = append(c.closes, in)
			c.mu.Unlock()
			return activities.CloseResult{ClosedAt: env.Now().UTC(), Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.WriteAudit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AuditInput) (activities.AuditResult, error) {
			c.add("audit", in.Key)
			var rec AuditRecord
			if err := json.Unmarshal(in.Record, &rec); err != nil {
				return activities.AuditResult{}, err
			}
			c.mu.Lock()
			c.audits = append(c.audits, rec)
			c.mu.Unlock()
			return activities.AuditResult{SHA256: "x", Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.EscalateApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NoticeInput) (activities.NotifyResult, error) {
			c.mu.Lock()
			if c.escalateErr != nil {
				c.mu.Unlock()
				return activities.NotifyResult{}, c.escalateErr
			}
			if c.escalateFails > 0 {
				c.escalateFails--
				c.mu.Unlock()
				return activities.NotifyResult{}, errors.New("smtp: connection refused")
			}
			c.mu.Unlock()
			c.add("escalate", in.Key)
			c.mu.Lock()
			c.escalated = append(c.escalated, in)
			c.mu.Unlock()
			return activities.NotifyResult{MessageID: "e1", Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.SendLetter, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.LetterInput) (activities.LetterResult, error) {
			c.add("letter", in.Key)
			if c.statusLetterErr != nil && in.Facts.Kind == "status" {
				return activities.LetterResult{}, c.statusLetterErr
			}
			if c.ackLetterErr != nil && in.Facts.Kind == "acknowledgment" {
				return activities.LetterResult{}, c.ackLetterErr
			}
			l, err := c.sendLetter(env.Now(), in.Key, in.Facts)
			return activities.LetterResult{Letter: l, Meta: one}, err
		}).Maybe()
	env.OnActivity(a.OverdueApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NoticeInput) (activities.NotifyResult, error) {
			c.add("overdue", in.Key)
			c.mu.Lock()
			c.overdue = append(c.overdue, in)
			c.mu.Unlock()
			return activities.NotifyResult{MessageID: "o1", Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.PublishApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.QueueInput) (activities.QueueResult, error) {
			if c.onQueue != nil {
				c.onQueue(in)
			}
			c.mu.Lock()
			c.queue = append(c.queue, in)
			c.mu.Unlock()
			return activities.QueueResult{Applied: true, Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.RemindApprovers, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NoticeInput) (activities.NotifyResult, error) {
			c.add("remind", in.Key)
			c.mu.Lock()
			c.reminded = append(c.reminded, in)
			c.mu.Unlock()
			return activities.NotifyResult{MessageID: "r1", Meta: one}, nil
		}).Maybe()
	env.OnActivity(a.OpenApproval, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OpenApprovalInput) (activities.OpenApprovalResult, error) {
			c.add("open", "")
			d := c.approvers
			if d == nil {
				b, err := authority.Load("")
				if err != nil {
					return activities.OpenApprovalResult{}, err
				}
				d = b.Approvers
			}
			inbox := testKeys()["inbox"]
			return activities.OpenApprovalResult{Approvers: withKeys(d), Services: []authority.Service{{Name: "inbox", Key: inbox.Public()}},
				Meta: one}, nil
		}).Maybe()
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		m := map[string]any{}
		if v, ok := sa.GetKeyword(ClaimStatusKey); ok {
			m["ClaimStatus"] = v
		}
		if v, ok := sa.GetTime(ApprovalDeadlineKey); ok {
			m["ApprovalDeadline"] = v
		}
		c.mu.Lock()
		c.sa = append(c.sa, m)
		c.mu.Unlock()
	}).Return(nil).Maybe()
}

func (s *ClaimSuite) start(c claim.Claim, opts Options) {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.ID, TaskQueue: TaskQueue})
	s.env.ExecuteWorkflow(ClaimWorkflow, ClaimInput{Claim: c, Options: opts})
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
}

func (s *ClaimSuite) result() ClaimResult {
	var r ClaimResult
	s.Require().NoError(s.env.GetWorkflowResult(&r))
	return r
}

func (s *ClaimSuite) status() Status {
	v, err := s.env.QueryWorkflow(QueryStatus)
	s.Require().NoError(err)
	var st Status
	s.Require().NoError(v.Get(&st))
	return st
}

func (s *ClaimSuite) signal(after time.Duration, name string, payload any) {
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(name, payload) }, after)
}

// statuses lists the ClaimStatus values upserted, in order.
func (s *ClaimSuite) statuses() []string {
	var out []string
	for _, m := range s.calls.sa {
		if v, ok := m["ClaimStatus"]; ok {
			out = append(out, v.(string))
		}
	}
	return out
}

func (s *ClaimSuite) TestBelowThresholdIsPaidWithoutAHuman() {
	s.start(testClaim("claim-0001", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal("640.00", r.Payout)
	s.Equal("tr_1", r.TransferID)
	s.Nil(r.Approval)

	// Every side effect carries its step key, built from the workflow ID.
	k := s.calls.keys
	s.Equal([]claim.IdempotencyKey{"claim-0001:step2:turn1", "claim-0001:step2:turn2"}, k["triage"], "the agent asks for tools, then answers")
	s.Equal([]claim.IdempotencyKey{"claim-0001:step2:turn1:lookup_policy", "claim-0001:step2:turn1:prior_claims",
		"claim-0001:step2:turn1:get_document_text"}, k["tool"])
	s.Equal([]claim.IdempotencyKey{"claim-0001:step4"}, k["assess"])
	s.Equal([]claim.IdempotencyKey{"claim-0001:step6"}, k["pay"])
	s.Equal([]claim.IdempotencyKey{"claim-0001:step7"}, k["notify"])
	s.Equal([]claim.IdempotencyKey{"claim-0001:step8"}, k["close"])
	s.Equal([]claim.IdempotencyKey{"claim-0001:step9"}, k["audit"])
	s.Require().Len(s.calls.pays, 1)
	s.Equal(activities.PayInput{Key: "claim-0001:step6", WorkflowID: "claim-0001", ClaimID: "claim-0001",
		AmountMinor: 64000, Currency: "usd", Destination: "acct_1Ada", WaitsOutOutages: true}, s.calls.pays[0])

	// Search attributes change twice (running, then paid), not per step.
	s.Equal([]string{StatusRunning, StatusPaid}, s.statuses())
	s.Require().Len(s.calls.audits, 1)
	s.Equal("tr_1", s.calls.audits[0].TransferID)
	s.Len(s.calls.audits[0].Models, 3, "two triage turns and the assessment")
}

// A model step out of capacity hands its wait back: the run waits on a
// durable timer and asks again, as often as it takes, and neither the
// step's retries nor the step cap count the waits (a cap of 14 activity
// executions, 20 waits).
func (s *ClaimSuite) TestModelCapacityWaitsAreDurableAndFree() {
	s.calls.budgetWaits = 20
	begin := s.env.Now()
	s.start(testClaim("claim-0001", "640.00"), Options{Caps: Caps{MaxSteps: 14}})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal("tr_1", r.TransferID)
	s.Zero(s.calls.budgetWaits)
	s.Len(append(s.calls.keys["triage"], s.calls.keys["assess"]...), 23, "three model calls, asked 20 more times")
	s.GreaterOrEqual(s.env.Now().Sub(begin), 100*time.Minute, "each wait a durable timer of 5 minutes")
}

// The waits are bounded: past 200 of them in one step the claim stops with
// a cap (dead-lettered, redrivable), not a history that grows until the
// server ends it. And attempts that ran before a hand-back (failed and
// retried) count against the step cap.
func (s *ClaimSuite) TestModelCapacityWaitsAreBounded() {
	s.calls.budgetWaits = 1000
	s.start(testClaim("claim-0001", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(ErrCap, r.DeadLetter.ErrorType)
	s.Contains(r.DeadLetter.Error, "waited 16h40m0s for model capacity over 200 waits")
	s.Equal(1000-201, s.calls.budgetWaits)
}

func (s *ClaimSuite) TestAttemptsBeforeAModelCapacityWaitCount() {
	s.calls.budgetWaits, s.calls.budgetAttempt = 10, 3 // each hand-back after two failed attempts
	s.start(testClaim("claim-0001", "640.00"), Options{Caps: Caps{MaxSteps: 14}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(ErrCap, r.DeadLetter.ErrorType)
	s.Contains(r.DeadLetter.Error, "activity executions")
}

// A step that fails retryably for ever is stopped by the step cap, not by
// its own retry policy: the cap cuts the step's attempts to the steps left
// and names itself in the dead letter. It guards execOnce's cut
// (workflows/checkpoint.go: `rp.MaximumAttempts = int32(left)`, and the
// capErr(CapSteps, …) that follows when those attempts run out). Seven
// steps run before the payment (TestStepCap): a cap of 10 leaves it 3
// attempts of its policy's 20.
func (s *ClaimSuite) TestTheStepCapStopsAStepThatKeepsRetrying() {
	s.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{serverRetryState()}})
	s.calls.payErr = temporal.NewApplicationError("stripe: 503 from the payment provider", "StripeUnavailable")
	s.start(testClaim("claim-0074", "640.00"), Options{Caps: Caps{MaxSteps: 10}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(ErrCap, r.DeadLetter.ErrorType, r.DeadLetter.Error)
	s.Equal(CapSteps, r.DeadLetter.Cap)
	s.Equal(int(claim.StepPay), r.DeadLetter.Step)
	s.Len(s.calls.keys["pay"], 3, "the payment tried as often as the cap left it, not its policy's 20 times")
	s.Empty(s.calls.pays)
	s.Empty(s.calls.keys["notify"], "nothing after the capped step")
}

// The same for a step that runs local: the claimant's e-mail after the
// payment (nothing pending) fails retryably for ever; the cap cuts its
// local attempts to the steps left and names itself in the dead letter.
// A local activity's exhausted retries come back as the activity's own
// error, with no retry state: execOnce must read them as the cap's end.
func (s *ClaimSuite) TestTheStepCapStopsALocalStepThatKeepsRetrying() {
	s.calls.notifyErr = temporal.NewApplicationError("smtp: 451 try again later", "MailUnavailable")
	s.start(testClaim("claim-0075", "640.00"), Options{Caps: Caps{MaxSteps: 10}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(int(claim.StepNotify), r.DeadLetter.Step)
	s.Equal(ErrCap, r.DeadLetter.ErrorType, r.DeadLetter.Error)
	s.Equal(CapSteps, r.DeadLetter.Cap)
	s.Len(s.calls.keys["notify"], 2, "the e-mail tried as often as the cap left it")
	s.Empty(s.calls.keys["close"], "nothing after the capped step")
}

// serverRetryState has activity failures say how they ended as the
// Temporal server says it: a regular activity whose retryable failures
// used up its retry policy's attempts ends in RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED,
// where the SDK's test environment (1.51) says RETRY_STATE_UNSPECIFIED of
// every failure, however it ended.
func serverRetryState() interceptor.WorkerInterceptor {
	return &outbound{wrap: func(next interceptor.WorkflowOutboundInterceptor) interceptor.WorkflowOutboundInterceptor {
		return &serverRetryStateOut{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: next}}
	}}
}

type serverRetryStateOut struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *serverRetryStateOut) ExecuteActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	return retryStated{o.Next.ExecuteActivity(ctx, typ, args...)}
}

// retryStated is a regular activity's future, its failure restated.
type retryStated struct{ workflow.Future }

func (f retryStated) Get(ctx workflow.Context, v any) error {
	err := f.Future.Get(ctx, v)
	var actErr *temporal.ActivityError
	var appErr *temporal.ApplicationError
	if !errors.As(err, &actErr) || actErr.RetryState() != enumspb.RETRY_STATE_UNSPECIFIED || !errors.As(err, &appErr) || appErr.NonRetryable() {
		return err
	}
	fc := temporal.GetDefaultFailureConverter()
	failure := proto.Clone(fc.ErrorToFailure(err)).(*failurepb.Failure)
	failure.GetActivityFailureInfo().RetryState = enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
	return fc.FailureToError(failure)
}

func (s *ClaimSuite) TestAboveThresholdWaitsThenPaysOnApprove() {
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", note("photos check out"))
	s.start(testClaim("claim-0042", "1840.00"), Options{})

	s.Equal(StatusWaiting, waiting.State)
	s.Equal(int(claim.StepApproval), waiting.Step)
	s.Require().NotNil(waiting.Approval)
	s.Equal("1840.00", waiting.Approval.Request.Amount)
	s.Equal(waiting.Approval.Request.SHA256(), waiting.Approval.RequestSHA256)
	s.Equal(72*time.Hour, waiting.Approval.Deadline.Sub(waiting.Approval.RequestedAt))

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().NotNil(r.Approval.Decision)
	d := r.Approval.Decision
	s.Equal("adjuster-17", d.Approver)
	s.Equal("photos check out", d.Note)
	s.Equal(approvals.Approve, d.Verdict)
	s.Equal(approvals.StageWaiting, d.Stage)
	s.True(d.HashBound, "a receipt names the full hash of the request it decides")
	s.Equal(approvals.ProofReceipt, d.Proof)
	s.Equal(testKeys()["adjuster-17"].Key.KeyID, d.KeyID)
	s.NotEmpty(d.Receipt, "the receipt is kept: anyone can verify it again")
	s.Equal(int64(184000), d.AmountMinor)
	s.Equal("1840.00", d.Request.Amount, "the decision records the request the approver saw")
	s.Require().Len(s.calls.pays, 1)
	pa := s.calls.pays[0].Approval
	s.Require().NotNil(pa, "the payment carries the decision, to check it again itself")
	s.Equal(d.Request, pa.Request)
	s.Equal([]string{d.Receipt}, pa.Receipts)
	s.False(pa.ByPolicy)
	s.Equal([]string{StatusRunning, StatusWaiting, StatusRunning, StatusPaid}, s.statuses())
	s.Empty(s.calls.escalated)
}

// The task an approval wakes writes the wait's end to the approval queue
// beside the claim's re-read, not before it (versionQueueBeside): the write
// of the end holds (for up to a second of real time) until the re-read has begun,
// which it does at once only when the two run side by side.
func (s *ClaimSuite) TestTheQueuesEndIsWrittenBesideTheReread() {
	reading := make(chan struct{})
	var once sync.Once
	s.calls.onLoad = func(n int) {
		if n == 2 { // 1 is intake
			once.Do(func() { close(reading) })
		}
	}
	var beside bool
	s.calls.onQueue = func(in activities.QueueInput) {
		if in.Open {
			return
		}
		select {
		case <-reading:
			beside = true
		case <-time.After(time.Second):
		}
	}
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0042", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.True(beside, "the re-read began while the queue's write of the end was under way")
	s.Len(s.calls.pays, 1)
	s.Equal(2, s.calls.loads, "intake and the re-read")
	s.Equal([]queueWrite{{1, true, "waiting", nil}, {2, false, "waiting", []string{"adjuster-17"}}}, s.queueWrites())
}

func (s *ClaimSuite) TestRejectPaysNothing() {
	s.reject(time.Hour, "adjuster-17", "duplicate of claim-0007")
	s.start(testClaim("claim-0043", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Contains(r.Reason, "duplicate of claim-0007")
	s.Empty(s.calls.pays)
	s.Require().Len(s.calls.notices, 1)
	s.Equal(StatusRejected, s.calls.notices[0].Outcome)
	s.Require().Len(s.calls.closes, 1)
	s.Equal(StatusRejected, s.calls.closes[0].Outcome)
	s.Equal(int64(0), s.calls.closes[0].PayoutMinor)
}

func (s *ClaimSuite) TestUnansweredWaitEscalatesThenExpires() {
	start := s.env.Now()
	s.start(testClaim("claim-0044", "2500.00"), Options{})
	r := s.result()
	s.Equal(StatusExpired, r.Status)
	s.Empty(s.calls.pays)
	s.Require().Len(s.calls.escalated, 1)
	s.Equal(claim.IdempotencyKey("claim-0044:step5:escalate"), s.calls.escalated[0].Key)
	s.Require().Len(s.calls.reminded, 1, "adjusters are reminded halfway through the TTL")
	s.Equal(claim.IdempotencyKey("claim-0044:step5:remind"), s.calls.reminded[0].Key)
	s.Equal([]string{StatusRunning, StatusWaiting, StatusEscalated, StatusExpired}, s.statuses())
	// 72 h, then 24 h, of workflow time; no wall-clock wait.
	s.Equal(96*time.Hour, s.env.Now().Sub(start).Round(time.Hour))
	var deadlines []time.Time
	for _, m := range s.calls.sa {
		if d, ok := m["ApprovalDeadline"]; ok {
			deadlines = append(deadlines, d.(time.Time))
		}
	}
	s.Require().Len(deadlines, 2)
	s.Equal(24*time.Hour, deadlines[1].Sub(deadlines[0]).Round(time.Hour))
	s.Equal([]queueWrite{{1, true, "waiting", nil}, {2, true, "escalated", nil}, {3, false, "escalated", nil}}, s.queueWrites())
	s.True(s.calls.queue[2].Approval.Expired)
}

func (s *ClaimSuite) TestCustomTTLs() {
	start := s.env.Now()
	s.start(testClaim("claim-0045", "2500.00"), Options{Approval: approvals.Policy{TTL: 3 * time.Second, EscalationTTL: 4 * time.Second}})
	s.Equal(StatusExpired, s.result().Status)
	s.Equal(7*time.Second, s.env.Now().Sub(start).Round(time.Second))
}

func (s *ClaimSuite) TestApprovalDuringEscalationIsHonoured() {
	s.approve(80*time.Hour, "supervisor-3", nil)
	s.start(testClaim("claim-0046", "2500.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(approvals.StageEscalated, r.Approval.Decision.Stage)
	s.Equal("supervisor-3", r.Approval.Decision.Approver)
	s.Len(s.calls.escalated, 1)
	s.Len(s.calls.pays, 1)
}

func (s *ClaimSuite) TestMalformedAndDuplicateSignalsAreRecordedAndIgnored() {
	s.signal(time.Minute, approvals.SignalApprove, "yes please")                                  // not an object
	s.signal(2*time.Minute, approvals.SignalApprove, map[string]string{"note": "no approver"})    // missing approver
	s.signal(3*time.Minute, approvals.SignalApprove, map[string]string{"aprover": "adjuster-17"}) // misspelt
	s.signal(4*time.Minute, approvals.SignalApprove, nil)                                         // empty
	s.reject(5*time.Minute, "adjuster-17", "")                                                    // no reason
	s.env.RegisterDelayedCallback(func() {
		ok := s.receipt("adjuster-17", "adjuster-17", approvals.Approve, nil)
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: ok}) // accepted
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: ok}) // duplicate
		s.env.SignalWorkflow(approvals.SignalReject, approvals.Input{Receipt: s.receipt("adjuster-9", "adjuster-9", approvals.Reject,
			func(r *approvals.Receipt) { r.Reason = "late" })})
	}, 6*time.Minute)
	s.start(testClaim("claim-0047", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Len(s.calls.pays, 1)
	att := r.Attempts
	s.Require().Len(att, 8)
	for i, want := range []string{"malformed payload", "unsigned", "unknown field", "empty payload",
		"needs a reason", "", "not waiting", "not waiting"} {
		if want == "" {
			s.True(att[i].Accepted, "attempt %d", i)
			continue
		}
		s.False(att[i].Accepted, "attempt %d", i)
		s.Contains(att[i].Refusal, want, "attempt %d", i)
	}
	s.Contains(att[0].Payload, "yes please")
	s.Equal(att, s.calls.audits[0].Attempts, "the audit record carries every attempt")
}

func (s *ClaimSuite) TestSignalBeforeTheWaitIsRefused() {
	// An approval sent before the request exists approves nothing.
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(approvals.SignalApprove, map[string]string{"approver": "adjuster-17"})
	}, 0)
	s.start(testClaim("claim-0048", "1840.00"), Options{Approval: approvals.Policy{TTL: time.Second, EscalationTTL: time.Second}})
	r := s.result()
	s.Equal(StatusExpired, r.Status)
	s.Require().NotEmpty(r.Attempts)
	s.Contains(r.Attempts[0].Refusal, "not waiting")
}

func (s *ClaimSuite) TestStaleHashIsRefused() {
	s.approve(2*time.Minute, "adjuster-17", func(r *approvals.Receipt) { r.RequestSHA256 = strings.Repeat("0", 64) })
	s.approve(3*time.Minute, "adjuster-17", nil)
	s.start(testClaim("claim-0049", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(r.Attempts, 2)
	s.Contains(r.Attempts[0].Refusal, "stale decision")
	s.Equal(approvals.CodeStaleHash, r.Attempts[0].Code)
	s.True(r.Approval.Decision.HashBound)
}

// The threshold is the worker's policy; the input may lower it, never
// raise it.
func (s *ClaimSuite) TestConfigurableThreshold() {
	rules := suiteRules()
	rules.AutoApproveLimit = "5000"
	s.calls.rules = &rules
	s.start(testClaim("claim-0050", "1840.00"), Options{})
	s.Equal(StatusPaid, s.result().Status)
	s.Nil(s.result().Approval)
}

func (s *ClaimSuite) TestInputMayLowerTheThreshold() {
	s.reject(time.Hour, "adjuster-17", "checked by hand")
	s.start(testClaim("claim-0050", "640.00"), Options{AutoApproveLimitMinor: 50_000})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Contains(r.Approval.Request.Reasons[0], "above the auto-approve limit 500.00")
}

func (s *ClaimSuite) TestFraudSignalsSendSmallClaimsToAHuman() {
	c := testClaim("claim-0051", "200.00")
	c.Description, c.Documents = "urgent cash", nil // thin, pressure language, no documents
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(c, Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().NotNil(r.Approval)
	reasons := strings.Join(r.Approval.Request.Reasons, "; ")
	s.Contains(reasons, "fraud signal raised for investigators during triage: thin-description,pressure-language,no-documents",
		"the agent flagged it: a rule, whatever the answer says")
	s.Contains(reasons, "fraud score 75 is at or over the review threshold 50")
	s.Contains(reasons, "assessment asks for review", "the model's own reason is kept beside the rules'")
}

func (s *ClaimSuite) TestUncoveredClaimIsRejectedWithoutAssessment() {
	c := testClaim("claim-0052", "200.00")
	c.PolicyID = "pol-9999"
	s.start(c, Options{})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Equal("no such policy", r.Reason)
	s.Empty(s.calls.keys["assess"])
	s.Empty(s.calls.pays)
	s.Len(s.calls.closes, 1)
}

func (s *ClaimSuite) TestDeductibleAndLimitClampThePayout() {
	c := testClaim("claim-0053", "2000.00")
	c.PolicyID = "pol-2002" // deductible 250, limit 1500
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(c, Options{})
	r := s.result()
	s.Equal("1500.00", r.Payout)
	s.Equal(int64(150_000), s.calls.pays[0].AmountMinor)
}

func (s *ClaimSuite) TestRefusedPaymentDeadLetters() {
	s.calls.payErr = temporal.NewNonRetryableApplicationError("stripe 400 invalid_request_error: No such destination", activities.ErrPaymentRefused, nil)
	s.start(testClaim("claim-0054", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(int(claim.StepPay), r.DeadLetter.Step)
	s.Equal(activities.ErrPaymentRefused, r.DeadLetter.ErrorType)
	s.Equal([]string{"payment claim-0054:step6"}, r.DeadLetter.UnknownEffects)
	s.Empty(s.calls.notices, "nothing after a failed payment")
	s.Equal([]string{StatusRunning, StatusDeadLettered}, s.statuses())
	// versionDeadLetterFile: the dead letter is on record, keyed by its run.
	s.Require().Len(s.calls.keys["audit"], 1)
	s.True(strings.HasPrefix(string(s.calls.keys["audit"][0]), "claim-0054:step9:dead-letter:"), s.calls.keys["audit"][0])
	s.Require().Len(s.calls.audits, 1)
	s.Equal(StatusDeadLettered, s.calls.audits[0].Outcome)
	s.Contains(s.calls.audits[0].Reason, "step 6 (pay) failed")
}

func (s *ClaimSuite) TestWithdrawnBeforeProcessing() {
	s.calls.loadStatus = "withdrawn"
	s.start(testClaim("claim-0055", "640.00"), Options{})
	s.Equal(StatusWithdrawn, s.result().Status)
	s.Empty(s.calls.keys["triage"])
	s.Empty(s.calls.pays)
}

func TestWorkflowIDMustBeClaimID(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "something-else"})
	env.ExecuteWorkflow(ClaimWorkflow, ClaimInput{Claim: testClaim("claim-0042", "10.00")})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(env.GetWorkflowError(), &appErr))
	assert.Equal(t, activities.ErrInvalidInput, appErr.Type())
	assert.Contains(t, appErr.Error(), "must be the claim ID")
}
