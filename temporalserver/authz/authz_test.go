package authz

import (
	"context"
	"crypto/x509/pkix"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/tasktoken"
	"go.temporal.io/server/common/testing/testlogger"
)

const ns = "claims"

func claimsFor(role string) *authorization.Claims {
	level := authorization.RoleWriter
	switch role {
	case RoleReader:
		level = authorization.RoleReader
	case RoleOperator:
		level = authorization.RoleAdmin
	}
	c := &authorization.Claims{Subject: SubjectPrefix + role, Namespaces: map[string]authorization.Role{ns: level}}
	if role == RoleAdmin {
		c.System = authorization.RoleAdmin
	}
	return c
}

func wf(m string) string { return api.WorkflowServicePrefix + m }

func queue(name string) *taskqueuepb.TaskQueue { return &taskqueuepb.TaskQueue{Name: name} }

func sticky(normal string) *taskqueuepb.TaskQueue {
	return &taskqueuepb.TaskQueue{Name: "host-1:3f2a", Kind: enumspb.TASK_QUEUE_KIND_STICKY, NormalName: normal}
}

func token(t *testing.T, workflowID, workflowType string) []byte {
	t.Helper()
	b, err := tasktoken.NewSerializer().Serialize(tasktoken.NewWorkflowTaskToken("ns-id", workflowID, "run-1", 5, 6, nil, 1, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if workflowType == "" {
		return b
	}
	tok, _ := tasktoken.NewSerializer().Deserialize(b)
	tok.WorkflowType = workflowType
	b, _ = tasktoken.NewSerializer().Serialize(tok)
	return b
}

func start(typ, id, q string) *workflowservice.StartWorkflowExecutionRequest {
	return &workflowservice.StartWorkflowExecutionRequest{Namespace: ns, WorkflowId: id,
		WorkflowType: &commonpb.WorkflowType{Name: typ}, TaskQueue: queue(q)}
}

func update(name string) *workflowservice.UpdateWorkflowExecutionRequest {
	return &workflowservice.UpdateWorkflowExecutionRequest{Namespace: ns,
		Request: &updatepb.Request{Input: &updatepb.Input{Name: name}}}
}

func signal(name string) *workflowservice.SignalWorkflowExecutionRequest {
	return &workflowservice.SignalWorkflowExecutionRequest{Namespace: ns, SignalName: name}
}

// TestRules is the table of docs/operations.md ("Who may call what"), call
// by call: each role's job allowed, and the attacks the issue names
// refused (a starter polling claims, the inbox changing routing, a reader
// deciding).
func TestRules(t *testing.T) {
	pollClaims := &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns, TaskQueue: queue("claims")}
	pollActivities := &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: queue("claims")}
	pollSticky := &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns, TaskQueue: sticky("claims")}
	pollWhatIf := &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: queue("claims-whatif.whatif-1")}
	pollWhatIfSticky := &workflowservice.PollWorkflowTaskQueueRequest{Namespace: ns, TaskQueue: sticky("claims-whatif.whatif-1")}
	completeClaim := &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: token(t, "claim-0042", "ClaimWorkflow")}
	completeClaimForged := &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: token(t, "claim-0042", "WhatIfWorkflow")}
	completeWhatIf := &workflowservice.RespondActivityTaskCompletedRequest{Namespace: ns, TaskToken: token(t, "whatif-1/claim-0042", "WhatIfClaimWorkflow")}
	completeByID := &workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: ns, WorkflowId: "claim-0042", ActivityId: "6"}
	answerClaim := &workflowservice.RespondWorkflowTaskCompletedRequest{Namespace: ns, TaskToken: token(t, "claim-0042", "ClaimWorkflow")}
	heartbeat := &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: ns, TaskToken: token(t, "claim-0042", "")}
	setCurrent := &workflowservice.SetWorkerDeploymentCurrentVersionRequest{Namespace: ns, DeploymentName: "durableclaims", BuildId: "rogue"}
	setRamping := &workflowservice.SetWorkerDeploymentRampingVersionRequest{Namespace: ns, DeploymentName: "durableclaims", BuildId: "rogue"}
	reset := &workflowservice.ResetWorkflowExecutionRequest{Namespace: ns}
	terminate := &workflowservice.TerminateWorkflowExecutionRequest{Namespace: ns}
	del := &workflowservice.DeleteWorkflowExecutionRequest{Namespace: ns}
	pin := &workflowservice.UpdateWorkflowExecutionOptionsRequest{Namespace: ns}
	describe := &workflowservice.DescribeWorkflowExecutionRequest{Namespace: ns}
	history := &workflowservice.GetWorkflowExecutionHistoryRequest{Namespace: ns}
	query := &workflowservice.QueryWorkflowRequest{Namespace: ns}
	describeDeployment := &workflowservice.DescribeWorkerDeploymentRequest{Namespace: ns}
	schedule := &workflowservice.CreateScheduleRequest{Namespace: ns}

	type call struct {
		method string
		req    any
	}
	// allowed lists, per role, the calls it may make; every other call of
	// calls is refused.
	calls := map[string]call{
		"poll claims":                    {"PollWorkflowTaskQueue", pollClaims},
		"poll claims' activities":        {"PollActivityTaskQueue", pollActivities},
		"poll claims' sticky queue":      {"PollWorkflowTaskQueue", pollSticky},
		"poll a what-if":                 {"PollActivityTaskQueue", pollWhatIf},
		"poll a what-if's sticky queue":  {"PollWorkflowTaskQueue", pollWhatIfSticky},
		"complete a claim's activity":    {"RespondActivityTaskCompleted", completeClaim},
		"complete, forged what-if type":  {"RespondActivityTaskCompleted", completeClaimForged},
		"complete a what-if's activity":  {"RespondActivityTaskCompleted", completeWhatIf},
		"complete a claim's by ID":       {"RespondActivityTaskCompletedById", completeByID},
		"answer a claim's workflow task": {"RespondWorkflowTaskCompleted", answerClaim},
		"heartbeat":                      {"RecordActivityTaskHeartbeat", heartbeat},
		"start a claim":                  {"StartWorkflowExecution", start("ClaimWorkflow", "claim-0042", "claims")},
		"start another type":             {"StartWorkflowExecution", start("PayEveryone", "claim-0042", "claims")},
		"start a reconciliation":         {"StartWorkflowExecution", start("ReconcileWorkflow", "reconcile", "claims")},
		"start a what-if":                {"StartWorkflowExecution", start("WhatIfWorkflow", "whatif-1", "claims-whatif.whatif-1")},
		"start a what-if on claims":      {"StartWorkflowExecution", start("WhatIfWorkflow", "whatif-1", "claims")},
		"start a what-if, claim's ID":    {"StartWorkflowExecution", start("WhatIfWorkflow", "claim-0042", "claims-whatif.claim-0042")},
		"decide":                         {"UpdateWorkflowExecution", update("decide")},
		"another update":                 {"UpdateWorkflowExecution", update("setPayout")},
		"signal approve":                 {"SignalWorkflowExecution", signal("approve")},
		"signal changed":                 {"SignalWorkflowExecution", signal("changed")},
		"another signal":                 {"SignalWorkflowExecution", signal("pay")},
		"set current version":            {"SetWorkerDeploymentCurrentVersion", setCurrent},
		"set ramping version":            {"SetWorkerDeploymentRampingVersion", setRamping},
		"pin a run to a build":           {"UpdateWorkflowExecutionOptions", pin},
		"reset":                          {"ResetWorkflowExecution", reset},
		"terminate":                      {"TerminateWorkflowExecution", terminate},
		"delete":                         {"DeleteWorkflowExecution", del},
		"describe":                       {"DescribeWorkflowExecution", describe},
		"history":                        {"GetWorkflowExecutionHistory", history},
		"query":                          {"QueryWorkflow", query},
		"describe deployment":            {"DescribeWorkerDeployment", describeDeployment},
		"create schedule":                {"CreateSchedule", schedule},
		"register namespace":             {"RegisterNamespace", &workflowservice.RegisterNamespaceRequest{Namespace: ns}},
	}
	readsOnly := []string{"describe", "history", "query", "describe deployment"}
	allowed := map[string][]string{
		RoleWorker: append([]string{"poll claims", "poll claims' activities", "poll claims' sticky queue", "poll a what-if",
			"poll a what-if's sticky queue", "complete a claim's activity", "complete, forged what-if type", "complete a what-if's activity",
			"complete a claim's by ID", "answer a claim's workflow task", "heartbeat", "create schedule"}, readsOnly...),
		RoleWhatIf: append([]string{"poll a what-if", "poll a what-if's sticky queue", "complete a what-if's activity",
			"start a what-if"}, readsOnly...),
		RoleStarter:   append([]string{"start a claim"}, readsOnly...),
		RoleInbox:     append([]string{"decide"}, readsOnly...),
		RoleClaimsctl: append([]string{"decide", "signal approve", "signal changed", "start a reconciliation", "create schedule"}, readsOnly...),
		RoleReader:    readsOnly,
		RoleOperator: append([]string{"decide", "signal approve", "signal changed", "start a reconciliation", "create schedule",
			"set current version", "set ramping version", "pin a run to a build", "reset", "terminate", "delete"}, readsOnly...),
		RoleAdmin: append([]string{"decide", "another update", "signal approve", "signal changed", "another signal", "start a claim",
			"start another type", "start a reconciliation", "start a what-if", "start a what-if on claims", "start a what-if, claim's ID",
			"create schedule", "set current version", "set ramping version", "pin a run to a build", "reset", "terminate", "delete",
			"register namespace"}, readsOnly...),
	}
	a := Authorizer{Log: log.NewNoopLogger()}
	for role, may := range allowed {
		for name, c := range calls {
			want := authorization.DecisionDeny
			for _, m := range may {
				if m == name {
					want = authorization.DecisionAllow
				}
			}
			res, err := a.Authorize(context.Background(), claimsFor(role), &authorization.CallTarget{APIName: wf(c.method), Namespace: ns, Request: c.req})
			if err != nil {
				t.Fatalf("%s, %s: %v", role, name, err)
			}
			if res.Decision != want {
				t.Errorf("%s, %s: got %v (%s), want %v", role, name, res.Decision, res.Reason, want)
			}
			if res.Decision == authorization.DecisionDeny && res.Reason == "" {
				t.Errorf("%s, %s: refused without a reason", role, name)
			}
		}
	}
}

// TestIdentityAndNamespace: no identity, a stranger's, a token of another
// namespace, and a reader's token writing are refused before the table.
func TestIdentityAndNamespace(t *testing.T) {
	a := Authorizer{Log: testlogger.NewTestLogger(t, testlogger.FailOnExpectedErrorOnly)}
	poll := &authorization.CallTarget{APIName: wf("PollActivityTaskQueue"), Namespace: ns,
		Request: &workflowservice.PollActivityTaskQueueRequest{Namespace: ns, TaskQueue: queue("claims")}}
	other := claimsFor(RoleWorker)
	other.Namespaces = map[string]authorization.Role{"elsewhere": authorization.RoleWriter}
	readerWriting := claimsFor(RoleWorker)
	readerWriting.Namespaces[ns] = authorization.RoleReader
	for name, c := range map[string]*authorization.Claims{
		"no identity":       nil,
		"a stranger":        {Subject: "mallory", Namespaces: map[string]authorization.Role{ns: authorization.RoleWriter}},
		"an unknown role":   {Subject: SubjectPrefix + "payer", Namespaces: map[string]authorization.Role{ns: authorization.RoleWriter}},
		"another namespace": other,
		"read permission":   readerWriting,
	} {
		res, err := a.Authorize(context.Background(), c, poll)
		if err != nil || res.Decision != authorization.DecisionDeny {
			t.Errorf("%s: got %v %v, want deny", name, res, err)
		}
	}
	res, _ := a.Authorize(context.Background(), claimsFor(RoleWorker), poll)
	if res.Decision != authorization.DecisionAllow {
		t.Errorf("the worker polling claims: %v (%s)", res.Decision, res.Reason)
	}
	res, _ = a.Authorize(context.Background(), nil, &authorization.CallTarget{APIName: wf("GetSystemInfo")})
	if res.Decision != authorization.DecisionAllow {
		t.Errorf("GetSystemInfo without identity: %v; the SDK asks it first", res.Decision)
	}
}

// TestCertificateClaims: a client certificate's Common Name is the
// identity, its namespace:NAME units the namespaces it acts in.
func TestCertificateClaims(t *testing.T) {
	c, err := CertificateClaims(pkix.Name{CommonName: "durableclaims-worker", OrganizationalUnit: []string{"namespace:claims", "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "durableclaims-worker" || c.Namespaces[ns] != authorization.RoleWriter || len(c.Namespaces) != 1 || c.System != 0 {
		t.Errorf("worker certificate: %+v", c)
	}
	if c, _ := CertificateClaims(pkix.Name{CommonName: "durableclaims-reader", OrganizationalUnit: []string{"namespace:claims"}}); c.Namespaces[ns] != authorization.RoleReader {
		t.Errorf("reader certificate: %+v", c)
	}
	if _, err := CertificateClaims(pkix.Name{CommonName: "www.example.com"}); err == nil {
		t.Error("a certificate naming no identity of ours was mapped")
	}
	m := ClaimMapper{}
	if c, err := m.GetClaims(&authorization.AuthInfo{}); c != nil || err != nil {
		t.Errorf("no token, no certificate: %+v %v, want no claims", c, err)
	}
	if _, err := m.GetClaims(&authorization.AuthInfo{AuthToken: "Bearer x"}); err == nil {
		t.Error("a token on a server that reads none was accepted")
	}
}
