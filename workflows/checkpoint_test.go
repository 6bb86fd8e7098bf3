package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Every row of the plan has the forms its kind needs, and nothing else: a
// local step has no regular form to fall back on, a regular step no local
// one, a costly step both.
func TestThePlanRowsHaveTheFormsTheirKindNeeds(t *testing.T) {
	for _, p := range []stepPlan{plan.read, plan.tool, plan.model, plan.freeModel, plan.effect, plan.turn, plan.sideStep, plan.notice} {
		switch p.how {
		case runLocal:
			assert.NotNil(t, p.local, p.name)
			assert.Nil(t, p.remote, p.name)
		case runRegular:
			assert.Nil(t, p.local, p.name)
			assert.NotNil(t, p.remote, p.name)
		case runCostly:
			assert.NotNil(t, p.local, p.name)
			assert.NotNil(t, p.remote, p.name)
		}
		if p.remote != nil {
			assert.Positive(t, p.remote.HeartbeatTimeout, "%s: a regular step heartbeats, so a dead worker is noticed in seconds", p.name)
		}
	}
}

// costlyModel answers as the rules model does but is not free to ask again
// (a real model): its turns must be recorded before the next costly step.
type costlyModel struct{ rules activities.RulesModel }

func (costlyModel) Name() string          { return "costly" }
func (costlyModel) PromptVersion() string { return "costly-1" }
func (m costlyModel) Triage(ctx context.Context, c claim.Claim) (activities.Reply[activities.Triage], error) {
	return m.rules.Triage(ctx, c)
}
func (m costlyModel) TriageTurn(ctx context.Context, req activities.TurnRequest) (activities.Reply[activities.Turn], error) {
	return m.rules.TriageTurn(ctx, req)
}
func (m costlyModel) Assess(ctx context.Context, r activities.AssessRequest) (activities.Reply[activities.Assessment], error) {
	return m.rules.Assess(ctx, r)
}

// forms records, in order, each activity the run started and its form.
func (s *ClaimSuite) forms() *[]string {
	var got []string
	s.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		got = append(got, info.ActivityType.Name+" local")
	})
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		got = append(got, info.ActivityType.Name+" regular")
	})
	return &got
}

// The auto-approve path takes exactly the forms the plan's comment shows:
// a costly local result is recorded before the next costly step, and
// nothing more is made regular than that needs.
func (s *ClaimSuite) TestTheCheckpointRuleOnTheAutoApprovePath() {
	for name, tc := range map[string]struct {
		model activities.Model
		want  []string
	}{
		"a model that costs to ask again": {costlyModel{}, []string{
			"LoadClaim local", "TriageTurn local", "CallTool local", "CallTool local", "CallTool local",
			"TriageTurn regular", // turn 1 is pending: turn 2 is its own checkpoint
			"AssessClaim regular", "PayClaimant regular",
			"NotifyClaimant local", "CloseClaim local", "WriteAudit local"}},
		"the rules model, free to ask again": {activities.RulesModel{}, []string{
			"LoadClaim local", "TriageTurn local", "CallTool local", "CallTool local", "CallTool local",
			"TriageTurn local",
			"AssessClaim local", // free too: the payment's schedule records it
			"PayClaimant regular",
			"NotifyClaimant local", "CloseClaim local", "WriteAudit local"}},
	} {
		s.SetupTest()
		s.calls.model = tc.model
		got := s.forms()
		s.start(testClaim(fmt.Sprintf("claim-cp-%d", len(tc.want)), "640.00"), Options{})
		s.Equal(StatusPaid, s.result().Status, name)
		s.Equal(tc.want, *got, name)
	}
}

// Runs that began before versionFreeAssess assessed in a regular activity,
// whatever the model, and replay so.
func (s *ClaimSuite) TestRunsBeforeFreeAssessAssessRegular() {
	s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(workflow.Version(versionQueueBeside))
	got := s.forms()
	s.start(testClaim("claim-cp-v16", "640.00"), Options{})
	s.Equal(StatusPaid, s.result().Status)
	s.Contains(*got, "AssessClaim regular")
	s.NotContains(*got, "AssessClaim local")
}

// A rejection by a free (local) assessment: the decision is this task's,
// so the claimant's e-mail runs regular and records it, and the close and
// the audit follow in a later task.
func (s *ClaimSuite) TestARejectionByAFreeAssessmentIsRecordedBeforeTheAudit() {
	s.calls.recommendNothing = true
	got := s.forms()
	s.start(testClaim("claim-cp-nothing", "640.00"), Options{})
	s.Equal(StatusRejected, s.result().Status)
	s.Contains(*got, "AssessClaim local")
	s.Equal([]string{"NotifyClaimant regular", "CloseClaim local", "WriteAudit local"}, (*got)[len(*got)-3:])
}

// The payout cap is met at the rules model's local assessment, in the
// run's first task: the dead letter's claim file, built from the history
// the server holds, is written after that task's steps are recorded (a
// regular activity), not in the same task.
func (s *ClaimSuite) TestADeadLetterIsFiledAfterWhatItsTaskRan() {
	got := s.forms()
	s.start(testClaim("claim-cp-capped", "640.00"), Options{Caps: Caps{MaxPayoutMinor: 50_000}})
	s.Equal(StatusDeadLettered, s.result().Status)
	s.Contains(*got, "AssessClaim local")
	s.Equal("WriteAudit regular", (*got)[len(*got)-1])

	// After a regular step (a model that costs assesses in one) the
	// task has nothing unrecorded: the file is written local, as before.
	s.SetupTest()
	s.calls.model = costlyModel{}
	got = s.forms()
	s.start(testClaim("claim-cp-capped-paid", "640.00"), Options{Caps: Caps{MaxPayoutMinor: 50_000}})
	s.Equal(StatusDeadLettered, s.result().Status)
	s.Contains(*got, "AssessClaim regular")
	s.Equal("WriteAudit local", (*got)[len(*got)-1])
}

// A local assessment's answer is pending, like any costly local result,
// unless it is free to ask for again (the rules as the primary); a
// fallback's answer is pending until the next schedule records it. Only a
// run whose triage answers were free assesses local at all.
func TestALocalAssessmentIsPendingUnlessItsAnswerIsFree(t *testing.T) {
	for name, tc := range map[string]struct {
		det  bool
		want string
	}{
		"the rules as the primary": {true, ""},
		"a fallback answered":      {false, "model"},
	} {
		r := &claimRun{}
		r.ran(plan.freeModel, true, &activities.AssessResult{Deterministic: tc.det})
		assert.Equal(t, tc.want, r.pending, name)
		assert.True(t, r.unrecorded, name)
		r.ran(plan.effect, false, nil)
		assert.Empty(t, r.pending, name)
		assert.False(t, r.unrecorded, "a regular step records the task's local steps")
	}
	for name, tc := range map[string]struct {
		free, freeAnswers bool
		want              stepPlan
	}{
		"free answers, from versionFreeAssess":   {true, true, plan.freeModel},
		"costly answers, from versionFreeAssess": {true, false, plan.model},
		"free answers, before versionFreeAssess": {false, true, plan.model},
	} {
		r := &claimRun{freeAnswers: tc.freeAnswers}
		r.since.freeAssess = tc.free
		assert.Equal(t, tc.want.how, r.assessPlan().how, name)
	}
}

// Runs that began before versionRecords close as they did: the close a
// regular activity that records the e-mail, the audit a costly side step.
func (s *ClaimSuite) TestRunsBeforeLocalRecordsCloseAsTheyDid() {
	s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(workflow.Version(versionReview))
	got := s.forms()
	s.start(testClaim("claim-cp-v3", "640.00"), Options{})
	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]string{"NotifyClaimant local", "CloseClaim regular", "WriteAudit local"}, (*got)[len(*got)-3:])
}

// What the task that ends a wait decided is recorded before a record embeds
// it: after a rejection the e-mail is a regular activity, so the close and
// the audit run in a later task, whose rerun after a crash rebuilds the
// same audit record. Runs before versionDecided kept all three local.
func (s *ClaimSuite) TestADecisionIsRecordedBeforeTheAuditEmbedsIt() {
	for name, tc := range map[string]struct {
		version workflow.Version
		want    []string
	}{
		"from versionDecided":   {versionDecided, []string{"NotifyClaimant regular", "CloseClaim local", "WriteAudit local"}},
		"before versionDecided": {versionAuthority, []string{"NotifyClaimant local", "CloseClaim local", "WriteAudit local"}},
	} {
		s.SetupTest()
		s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(tc.version)
		got := s.forms()
		s.reject(time.Hour, "adjuster-17", "the invoice is for another address")
		s.start(testClaim("claim-cp-reject", "1840.00"), Options{})
		s.Equal(StatusRejected, s.result().Status, name)
		s.Equal(tc.want, (*got)[len(*got)-3:], name)
	}
}

// A wait's reminder and escalation notice run local in the task their timer
// woke from versionLocalNotices on (an escalation costs the server one
// workflow task, not two and an activity task), the escalation too after a
// local reminder, since the escalation's own timer fired between them.
// Runs before ran both regular, and replay them so.
func (s *ClaimSuite) TestAWaitsNoticesRunInTheTaskTheirTimerWoke() {
	for name, tc := range map[string]struct {
		version workflow.Version
		want    []string
	}{
		"from versionLocalNotices":   {versionLocalNotices, []string{"RemindApprovers local", "EscalateApproval local"}},
		"before versionLocalNotices": {versionProvenance, []string{"RemindApprovers regular", "EscalateApproval regular"}},
	} {
		s.SetupTest()
		s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(tc.version)
		got := s.forms()
		s.start(testClaim("claim-cp-notices", "2500.00"), Options{})
		s.Equal(StatusExpired, s.result().Status, name)
		var notices []string
		for _, f := range *got {
			if strings.HasPrefix(f, "RemindApprovers") || strings.HasPrefix(f, "EscalateApproval") {
				notices = append(notices, f)
			}
		}
		s.Equal(tc.want, notices, name)
		s.Len(s.calls.escalated, 1, name)
		s.Len(s.calls.reminded, 1, name)
	}
}

// A notice whose quick local attempts fail (the relay is down) is sent as
// a regular activity, whose retries cost no workflow task each; the
// escalation still happens once, and the wait goes on to its expiry.
func (s *ClaimSuite) TestANoticeThatFailsLocallyIsRetriedRegular() {
	s.calls.escalateFails = 4
	got := s.forms()
	s.start(testClaim("claim-cp-relay-down", "2500.00"), Options{})
	s.Equal(StatusExpired, s.result().Status)
	var escalations []string
	for _, f := range *got {
		if strings.HasPrefix(f, "EscalateApproval") {
			escalations = append(escalations, f)
		}
	}
	s.Equal([]string{"EscalateApproval local", "EscalateApproval local", "EscalateApproval local",
		"EscalateApproval regular", "EscalateApproval regular"}, escalations)
	s.Len(s.calls.escalated, 1)
}

// A wait that ends in a task where a local step ran (a notice after its
// timer, a re-read) leaves that step unrecorded: from versionFreeAssess a
// dead letter in that task files its claim file after it, in the regular
// form. Runs before read nothing of it.
func TestAWaitsEndLeavesItsTasksLocalStepsUnrecorded(t *testing.T) {
	for name, free := range map[string]bool{"from versionFreeAssess": true, "before": false} {
		r := &claimRun{}
		r.since.freeAssess = free
		r.taskBoundary() // the timer fired
		r.ran(plan.notice, true, nil)
		r.waited() // a decision in the same task
		assert.Equal(t, free, r.unrecorded, name)
	}
}
