package workflows

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// The test environment runs every workflow task on no build at all
// (GetCurrentBuildID is empty there), so these tests run the claim workflow
// on a worker whose build they name: build-A for the first half hour of the
// run, build-B after, as if the worker had been redeployed meanwhile.
// The model activities' results name activityBuild.
func twoBuilds(ctx workflow.Context) string {
	if workflow.Now(ctx).Sub(workflow.GetInfo(ctx).WorkflowStartTime) < 30*time.Minute {
		return "build-A"
	}
	return "build-B"
}

// onTwoBuilds is ClaimWorkflow on twoBuilds (SetupTest registers it).
func onTwoBuilds(ctx workflow.Context, in ClaimInput) (ClaimResult, error) {
	r, err := newClaimRun(ctx, in)
	if err != nil {
		return ClaimResult{}, err
	}
	r.buildID = twoBuilds
	return r.run(ctx)
}

func (s *ClaimSuite) startOnTwoBuilds(c claim.Claim, opts Options) {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.ID, TaskQueue: TaskQueue})
	s.env.ExecuteWorkflow("ClaimWorkflowOnTwoBuilds", ClaimInput{Claim: c, Options: opts})
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
}

// policyVersion is the version of the policy the mocked intake records.
var policyVersion = suiteRules().Version()

// Every model call in the status, the audit record and the result names its
// model, prompt version and the build that asked.
func (s *ClaimSuite) modelCallsNameTheirProvenance(calls []ModelUse, want int) {
	s.Require().Len(calls, want)
	for _, m := range calls {
		s.Equal([3]string{"rules/v1", "rules-1", activityBuild}, [3]string{m.Model, m.PromptVersion, m.BuildID}, "step %d turn %d", m.Step, m.Turn)
	}
}

// An auto-approval names the build that decided it, the policy the run
// follows and the answers it rests on (the triage's and the assessment),
// in the status, the audit record and the result alike.
func (s *ClaimSuite) TestAnAutoApprovalNamesItsBuildPolicyAndAnswers() {
	s.startOnTwoBuilds(testClaim("claim-0301", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	want := &Decided{By: DecidedByRules, Verdict: approvals.Approve, BuildID: "build-A", PolicyVersion: policyVersion,
		ModelAnswers: []string{"turn2-sha", "assess-sha"}}
	st := s.status()
	s.Equal(want, st.Decided)
	s.Equal(policyVersion, st.PolicyVersion)
	s.modelCallsNameTheirProvenance(st.ModelCalls, 3)
	s.Require().Len(s.calls.audits, 1)
	rec := s.calls.audits[0]
	s.Equal(want, rec.Decided)
	s.Equal(policyVersion, rec.PolicyVersion)
	s.modelCallsNameTheirProvenance(rec.Models, 3)
	s.Equal(want, r.Decided)
	s.Equal(policyVersion, r.PolicyVersion)
}

// A person's decision names the build that accepted it, not the one that
// opened the request; so does every attempt, refused or accepted; and the
// outcome names that decision's build, the policy and the answers the
// request rests on.
func (s *ClaimSuite) TestAPersonsDecisionNamesTheBuildThatAcceptedIt() {
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Minute)
	s.signal(90*time.Minute, approvals.SignalApprove, "not an object")
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.startOnTwoBuilds(testClaim("claim-0302", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)

	s.Equal(policyVersion, waiting.PolicyVersion, "the status names the policy while the claim waits")
	s.Nil(waiting.Decided, "nothing is decided yet")
	s.modelCallsNameTheirProvenance(waiting.ModelCalls, 3)

	s.Require().NotNil(r.Approval.Decision)
	d := r.Approval.Decision
	s.Equal("adjuster-17", d.Approver)
	s.Equal([2]string{"build-B", policyVersion}, [2]string{d.BuildID, d.PolicyVersion})
	s.Require().Len(r.Attempts, 2)
	for _, at := range r.Attempts {
		s.Equal([2]string{"build-B", policyVersion}, [2]string{at.BuildID, at.PolicyVersion}, "accepted: %v", at.Accepted)
	}
	want := &Decided{By: DecidedByApprover, Verdict: approvals.Approve, BuildID: "build-B", PolicyVersion: policyVersion,
		ModelAnswers: []string{"turn2-sha", "assess-sha"}}
	s.Equal(want, r.Decided)
	s.Require().Len(s.calls.audits, 1)
	rec := s.calls.audits[0]
	s.Equal(want, rec.Decided)
	s.Require().Len(rec.Approvals, 1)
	s.Equal("build-B", rec.Approvals[0].Decision.BuildID, "the audit record carries the decision's build")
	s.Equal(r.Attempts, rec.Attempts)
}

// A rejection by the rules names the build that rejected and the answer it
// rests on (the triage: no assessment was asked for an uncovered claim);
// the decision is recorded before the audit record names its build: the
// claimant's e-mail runs as a regular activity.
func (s *ClaimSuite) TestARejectionByTheRulesIsRecordedBeforeTheAuditNamesIt() {
	c := testClaim("claim-0303", "200.00")
	c.PolicyID = "pol-9999"
	got := s.forms()
	s.startOnTwoBuilds(c, Options{})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	want := &Decided{By: DecidedByRules, Verdict: approvals.Reject, BuildID: "build-A", PolicyVersion: policyVersion,
		ModelAnswers: []string{"turn2-sha"}}
	s.Equal(want, r.Decided)
	s.Require().Len(s.calls.audits, 1)
	s.Equal(want, s.calls.audits[0].Decided)
	s.Equal([]string{"NotifyClaimant regular", "CloseClaim local", "WriteAudit local"}, (*got)[len(*got)-3:])
}

// Nobody decided: the policy's final outcome names the build that applied
// it, at the deadline.
func (s *ClaimSuite) TestAnExpiryNamesTheBuildThatAppliedThePolicy() {
	s.startOnTwoBuilds(testClaim("claim-0304", "2500.00"), Options{})
	r := s.result()
	s.Equal(StatusExpired, r.Status)
	s.Equal(&Decided{By: DecidedByPolicy, Verdict: approvals.Reject, BuildID: "build-B", PolicyVersion: policyVersion,
		ModelAnswers: []string{"turn2-sha", "assess-sha"}}, r.Decided)
	s.Equal(r.Decided, s.calls.audits[0].Decided)
}

// Runs that began before versionProvenance record none of it, so their
// records keep the bytes they were written with, and a rejection by the
// rules ends in one workflow task as it did.
func (s *ClaimSuite) TestRunsBeforeProvenanceRecordNone() {
	for name, tc := range map[string]struct {
		claim claim.Claim
		want  string
	}{
		"approved": {testClaim("claim-0305", "1840.00"), StatusPaid},
		"rejected by the rules": {func() claim.Claim {
			c := testClaim("claim-0306", "200.00")
			c.PolicyID = "pol-9999"
			return c
		}(), StatusRejected},
	} {
		s.SetupTest()
		s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(workflow.Version(versionBudget))
		got := s.forms()
		s.approve(time.Hour, "adjuster-17", nil)
		s.startOnTwoBuilds(tc.claim, Options{})
		r := s.result()
		s.Equal(tc.want, r.Status, name)
		s.Nil(r.Decided, name)
		s.Empty(r.PolicyVersion, name)
		s.Require().Len(s.calls.audits, 1, name)
		rec := s.calls.audits[0]
		s.Nil(rec.Decided, name)
		s.Empty(rec.PolicyVersion, name)
		for _, m := range rec.Models {
			s.Empty(m.PromptVersion+m.BuildID, name)
		}
		for _, at := range rec.Attempts {
			s.Empty(at.BuildID+at.PolicyVersion, name)
		}
		if tc.want == StatusRejected {
			s.Equal([]string{"NotifyClaimant local", "CloseClaim local", "WriteAudit local"}, (*got)[len(*got)-3:], name)
		} else {
			s.Empty(r.Approval.Decision.BuildID, name)
		}
	}
}
