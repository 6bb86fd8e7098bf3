// Package authz is who may call what on durableclaims' Temporal server:
// a claim mapper that reads the identity a call presents (a JWT of
// internal/temporalauth, or a client certificate) and an authorizer that
// allows a call only when the rule table below names the caller's role for
// it. Everything else is refused PermissionDenied and logged.
//
// Temporal's default authorizer grants by role per namespace: any writer
// may poll any task queue, answer any task, or make its own build the
// current version of a Worker Deployment. Here the worker alone takes and
// answers the claims' tasks, an operator alone changes routing or resets,
// terminates and deletes runs, and each other program may do only its job.
//
// The identities are the subjects the project issues: durableclaims-<role>.
// This module builds against the Temporal server's own dependencies, so it
// shares no Go code with the product; the role names are the contract, and
// testbed/cluster's tests call the real server with every role's token.
package authz

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/tasktoken"
)

// Roles, one identity per program (internal/temporalauth issues their
// tokens; a client certificate names one in its Common Name).
const (
	RoleWorker    = "worker"    // bin/worker: takes and answers the claims' tasks
	RoleWhatIf    = "whatif"    // claimsctl whatif: takes and answers its own what-if's tasks
	RoleStarter   = "starter"   // bin/starter: starts claims
	RoleInbox     = "inbox"     // bin/inbox: decides through the decide update
	RoleClaimsctl = "claimsctl" // the operator's everyday tool: signals, decisions, reconcile, what-ifs
	RoleReader    = "reader"    // dashboards, the UI, auditors, claimsctl's read-only use
	RoleOperator  = "operator"  // deploys and repairs: routing, reset, terminate, delete
	RoleAdmin     = "admin"     // the cluster: namespaces, search attributes; an operator too
)

// SubjectPrefix begins every identity's subject: durableclaims-worker.
const SubjectPrefix = "durableclaims-"

// Names of the claims application the rules refer to (workflows/names.go,
// whatif/workflow.go, approvals).
const (
	ClaimWorkflow       = "ClaimWorkflow"
	ReconcileWorkflow   = "ReconcileWorkflow"
	WhatIfWorkflow      = "WhatIfWorkflow"
	WhatIfClaimWorkflow = "WhatIfClaimWorkflow"
	WhatIfTaskQueuePfx  = "claims-whatif."
	WhatIfWorkflowIDPfx = "whatif-"
	DecideUpdate        = "decide"
	SignalApprove       = "approve"
	SignalReject        = "reject"
	SignalChanged       = "changed"
)

// Groups of the WorkflowService's methods the rules name.
var (
	// taskAPIs take or answer tasks: a caller who may call them acts as a
	// worker.
	taskAPIs = []string{
		"PollWorkflowTaskQueue", "PollActivityTaskQueue", "PollNexusTaskQueue",
		"RespondWorkflowTaskCompleted", "RespondWorkflowTaskFailed", "RespondQueryTaskCompleted",
		"RespondActivityTaskCompleted", "RespondActivityTaskCompletedById",
		"RespondActivityTaskFailed", "RespondActivityTaskFailedById",
		"RespondActivityTaskCanceled", "RespondActivityTaskCanceledById",
		"RecordActivityTaskHeartbeat", "RecordActivityTaskHeartbeatById",
		"RespondNexusTaskCompleted", "RespondNexusTaskFailed",
		"ResetStickyTaskQueue", "ShutdownWorker", "RecordWorkerHeartbeat",
	}
	// routing decides which build runs which run.
	routing = []string{
		"SetWorkerDeploymentCurrentVersion", "SetWorkerDeploymentRampingVersion", "SetWorkerDeploymentManager",
		"DeleteWorkerDeployment", "DeleteWorkerDeploymentVersion", "UpdateWorkerDeploymentVersionMetadata",
		"UpdateWorkerVersioningRules", "UpdateWorkerBuildIdCompatibility", "SetCurrentDeployment",
		"UpdateWorkflowExecutionOptions", "UpdateTaskQueueConfig", "UpdateWorkerConfig",
	}
	// repairs change or end runs outside their own code.
	repairs = []string{
		"ResetWorkflowExecution", "TerminateWorkflowExecution", "DeleteWorkflowExecution",
		"RequestCancelWorkflowExecution", "StartBatchOperation", "StopBatchOperation",
		"UpdateActivityOptions", "PauseActivity", "UnpauseActivity", "ResetActivity",
		"CreateWorkflowRule", "DeleteWorkflowRule", "TriggerWorkflowRule",
	}
	// schedules: the reconciliation schedule, kept by the worker and
	// claimsctl schedule.
	schedules = []string{"CreateSchedule", "UpdateSchedule", "PatchSchedule", "DeleteSchedule"}
)

// Call is one call as the rules see it.
type Call struct {
	Role      string
	API       string // the method's full name
	Namespace string
	Request   any
}

func (c Call) method() string { return api.MethodName(c.API) }

// rule allows role some methods, when cond (nil: always) says yes; cond
// returns why not.
type rule struct {
	roles   []string
	methods func(method string, md api.MethodMetadata) bool
	cond    func(c Call) string
	why     string // what the rule is for, in the table's words
}

func these(names ...[]string) func(string, api.MethodMetadata) bool {
	all := slices.Concat(names...)
	return func(m string, _ api.MethodMetadata) bool { return slices.Contains(all, m) }
}

func named(names ...string) func(string, api.MethodMetadata) bool { return these(names) }

// reads are the methods the server itself calls read-only.
func reads(_ string, md api.MethodMetadata) bool { return md.Access == api.AccessReadOnly }

// Rules is the table, in the order docs/operations.md shows it. A call is
// allowed when one rule names its role and method and its condition holds;
// the token's namespace binding and the server's read/write/admin levels
// hold as well (Authorize).
var Rules = []rule{
	{roles: all(), methods: reads, why: "read (describe, list, count, history, query, deployments)"},
	{roles: []string{RoleWorker}, methods: these(taskAPIs), why: "take, answer and heartbeat tasks on any task queue"},
	{roles: []string{RoleWhatIf}, methods: these(taskAPIs), cond: whatIfTask,
		why: "take, answer and heartbeat a what-if's own tasks (claims-whatif.* queues, whatif-* runs)"},
	{roles: []string{RoleWorker, RoleClaimsctl, RoleOperator, RoleAdmin}, methods: these(schedules),
		why: "keep the reconciliation schedule"},
	{roles: []string{RoleStarter}, methods: named("StartWorkflowExecution"), cond: workflowTypeIn(ClaimWorkflow),
		why: "start claims (ClaimWorkflow)"},
	{roles: []string{RoleClaimsctl, RoleOperator, RoleAdmin}, methods: named("StartWorkflowExecution"),
		cond: workflowTypeIn(ReconcileWorkflow), why: "start a reconciliation"},
	{roles: []string{RoleWhatIf}, methods: named("StartWorkflowExecution"), cond: whatIfStart,
		why: "start a what-if (WhatIfWorkflow on its own queue)"},
	{roles: []string{RoleInbox, RoleClaimsctl, RoleOperator, RoleAdmin}, methods: named("UpdateWorkflowExecution"),
		cond: updateNamed(DecideUpdate), why: "decide (the decide update)"},
	{roles: []string{RoleClaimsctl, RoleOperator, RoleAdmin}, methods: named("SignalWorkflowExecution"),
		cond: signalNamed(SignalApprove, SignalReject, SignalChanged), why: "signal approve, reject, changed"},
	{roles: []string{RoleOperator, RoleAdmin}, methods: these(routing, repairs),
		why: "change routing; reset, terminate, cancel, delete runs"},
	{roles: []string{RoleAdmin}, methods: func(m string, _ api.MethodMetadata) bool { return !slices.Contains(taskAPIs, m) },
		why: "everything but tasks: namespaces, search attributes, clusters, any run"},
}

func all() []string {
	return []string{RoleWorker, RoleWhatIf, RoleStarter, RoleInbox, RoleClaimsctl, RoleReader, RoleOperator, RoleAdmin}
}

// Decide applies the table to a call: "" allows it, anything else is the
// reason it is refused.
func Decide(c Call) string {
	md := api.GetMethodMetadata(c.API)
	m := c.method()
	matched := ""
	for _, r := range Rules {
		if !slices.Contains(r.roles, c.Role) || !r.methods(m, md) {
			continue
		}
		if r.cond == nil {
			return ""
		}
		why := r.cond(c)
		if why == "" {
			return ""
		}
		matched = why
	}
	if matched != "" {
		return fmt.Sprintf("%s may not call %s: %s", c.Role, m, matched)
	}
	return fmt.Sprintf("%s may not call %s", c.Role, m)
}

func workflowTypeIn(types ...string) func(Call) string {
	return func(c Call) string {
		r, ok := c.Request.(interface{ GetWorkflowType() *commonpb.WorkflowType })
		if !ok {
			return "the request names no workflow type"
		}
		if t := r.GetWorkflowType().GetName(); !slices.Contains(types, t) {
			return fmt.Sprintf("workflow type %q is not %s", clip(t), strings.Join(types, " or "))
		}
		return ""
	}
}

func updateNamed(names ...string) func(Call) string {
	return func(c Call) string {
		r, ok := c.Request.(*workflowservice.UpdateWorkflowExecutionRequest)
		if !ok {
			return "not an update request"
		}
		if n := r.GetRequest().GetInput().GetName(); !slices.Contains(names, n) {
			return fmt.Sprintf("update %q is not %s", clip(n), strings.Join(names, " or "))
		}
		return ""
	}
}

func signalNamed(names ...string) func(Call) string {
	return func(c Call) string {
		r, ok := c.Request.(*workflowservice.SignalWorkflowExecutionRequest)
		if !ok {
			return "not a signal request"
		}
		if n := r.GetSignalName(); !slices.Contains(names, n) {
			return fmt.Sprintf("signal %q is not %s", clip(n), strings.Join(names, ", "))
		}
		return ""
	}
}

// whatIfStart: a what-if's own workflow, under a what-if's ID, on a
// what-if's queue.
func whatIfStart(c Call) string {
	r, ok := c.Request.(*workflowservice.StartWorkflowExecutionRequest)
	if !ok {
		return "not a start request"
	}
	if why := workflowTypeIn(WhatIfWorkflow)(c); why != "" {
		return why
	}
	if !strings.HasPrefix(r.GetWorkflowId(), WhatIfWorkflowIDPfx) {
		return fmt.Sprintf("workflow ID %q does not begin %s", clip(r.GetWorkflowId()), WhatIfWorkflowIDPfx)
	}
	if q := queueOf(r.GetTaskQueue()); !strings.HasPrefix(q, WhatIfTaskQueuePfx) {
		return fmt.Sprintf("task queue %q is not a what-if's (%s*)", clip(q), WhatIfTaskQueuePfx)
	}
	return ""
}

// whatIfTask: a poll of a what-if's queue, or an answer to a task of a
// what-if's run. Task tokens are not signed, so the run is read from the
// token and checked by its ID and type both: a what-if's runs are
// whatif-*, and no claim ID may begin so (internal/claim).
func whatIfTask(c Call) string {
	if r, ok := c.Request.(interface{ GetTaskQueue() *taskqueuepb.TaskQueue }); ok {
		if q := queueOf(r.GetTaskQueue()); !strings.HasPrefix(q, WhatIfTaskQueuePfx) {
			return fmt.Sprintf("task queue %q is not a what-if's (%s*)", clip(q), WhatIfTaskQueuePfx)
		}
		return ""
	}
	if r, ok := c.Request.(interface{ GetWorkflowId() string }); ok && r.GetWorkflowId() != "" {
		return whatIfRun(r.GetWorkflowId(), "")
	}
	if r, ok := c.Request.(interface{ GetTaskToken() []byte }); ok {
		if c.method() == "RespondQueryTaskCompleted" {
			t, err := tasktoken.NewSerializer().DeserializeQueryTaskToken(r.GetTaskToken())
			if err != nil {
				return "unreadable query task token"
			}
			if !strings.HasPrefix(t.GetTaskQueue(), WhatIfTaskQueuePfx) {
				return fmt.Sprintf("task queue %q is not a what-if's", clip(t.GetTaskQueue()))
			}
			return ""
		}
		t, err := tasktoken.NewSerializer().Deserialize(r.GetTaskToken())
		if err != nil {
			return "unreadable task token"
		}
		return whatIfRun(t.GetWorkflowId(), t.GetWorkflowType())
	}
	if c.method() == "ShutdownWorker" || c.method() == "RecordWorkerHeartbeat" {
		return "" // about the caller's own worker, no task
	}
	return "the request names no what-if task"
}

func whatIfRun(id, typ string) string {
	switch {
	case !strings.HasPrefix(id, WhatIfWorkflowIDPfx):
		return fmt.Sprintf("run %q is not a what-if's (%s*)", clip(id), WhatIfWorkflowIDPfx)
	case typ != "" && typ != WhatIfWorkflow && typ != WhatIfClaimWorkflow:
		return fmt.Sprintf("workflow type %q is not a what-if's", clip(typ))
	}
	return ""
}

// queueOf is a task queue's name; a sticky queue is named by the queue it
// stands in for.
func queueOf(q *taskqueuepb.TaskQueue) string {
	if q.GetKind() == enumspb.TASK_QUEUE_KIND_STICKY && q.GetNormalName() != "" {
		return q.GetNormalName()
	}
	return q.GetName()
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// RoleOf is the role a subject names, "" for a subject that is none of
// ours.
func RoleOf(subject string) string {
	role, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok || !slices.Contains(all(), role) {
		return ""
	}
	return role
}

// Authorizer is the server's authorizer: health checks and the server's
// version are open (the SDK asks before it authenticates anything);
// everything else needs an identity of ours, bound to the call's
// namespace at the level the call needs, and a rule of the table.
type Authorizer struct {
	Log log.Logger
}

var (
	allow = authorization.Result{Decision: authorization.DecisionAllow}
)

// Authorize implements authorization.Authorizer.
func (a Authorizer) Authorize(_ context.Context, claims *authorization.Claims, t *authorization.CallTarget) (authorization.Result, error) {
	if authorization.IsHealthCheckAPI(t.APIName) {
		return allow, nil
	}
	why := a.decide(claims, t)
	if why == "" {
		return allow, nil
	}
	subject := ""
	if claims != nil {
		subject = claims.Subject
	}
	if a.Log != nil {
		a.Log.Warn("durableclaims authz: call refused", tag.NewStringTag("subject", clip(subject)),
			tag.NewStringTag("api", api.MethodName(t.APIName)), tag.WorkflowNamespace(clip(t.Namespace)), tag.NewStringTag("reason", why))
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: why}, nil
}

func (a Authorizer) decide(claims *authorization.Claims, t *authorization.CallTarget) string {
	if claims == nil {
		return "no identity: every call needs a durableclaims token or client certificate"
	}
	if claims.Subject == "" && claims.System == authorization.RoleAdmin {
		// The server's own system workers, through the internal frontend,
		// whose claim mapper grants every call this (the public frontend's,
		// ClaimMapper, never makes claims without a subject).
		return ""
	}
	role := RoleOf(claims.Subject)
	if role == "" {
		return fmt.Sprintf("%q is not a durableclaims identity", clip(claims.Subject))
	}
	md := api.GetMethodMetadata(t.APIName)
	var has authorization.Role
	switch md.Scope {
	case api.ScopeCluster:
		has = claims.System
	case api.ScopeNamespace:
		has = claims.System | claims.Namespaces[t.Namespace]
	default:
		return "not an API of the frontend"
	}
	if has < need(md.Access) {
		return fmt.Sprintf("%s's permissions do not cover %s in namespace %q", role, api.MethodName(t.APIName), clip(t.Namespace))
	}
	return Decide(Call{Role: role, API: t.APIName, Namespace: t.Namespace, Request: t.Request})
}

func need(a api.Access) authorization.Role {
	switch a {
	case api.AccessReadOnly:
		return authorization.RoleReader
	case api.AccessWrite:
		return authorization.RoleWriter
	}
	return authorization.RoleAdmin
}

// ClaimMapper reads a call's identity: a bearer token is checked by the
// server's own JWT claim mapper (signature against the configured key set,
// expiry, the permissions claim); a verified client certificate names its
// role in its Common Name (durableclaims-worker) and its namespaces in its
// Organizational Units (namespace:claims). Neither: no claims, refused.
type ClaimMapper struct {
	JWT authorization.ClaimMapper
}

// GetClaims implements authorization.ClaimMapper.
func (m ClaimMapper) GetClaims(ai *authorization.AuthInfo) (*authorization.Claims, error) {
	if ai.AuthToken != "" {
		if m.JWT == nil {
			return nil, fmt.Errorf("a bearer token, and this server reads no tokens (global.authorization.jwtKeyProvider)")
		}
		c, err := m.JWT.GetClaims(ai)
		if err != nil {
			return nil, err
		}
		if c.Subject == "" {
			return nil, fmt.Errorf("a token without a subject names no identity")
		}
		return c, nil
	}
	if ai.TLSSubject != nil {
		return CertificateClaims(*ai.TLSSubject)
	}
	return nil, nil
}

// AuthInfoRequired: a call with neither a token nor a certificate gets
// no claims, and the authorizer refuses it.
func (ClaimMapper) AuthInfoRequired() bool { return true }

// CertificateClaims maps a client certificate's subject (already verified
// by the frontend's TLS against its client CA) to claims.
func CertificateClaims(s pkix.Name) (*authorization.Claims, error) {
	role := RoleOf(s.CommonName)
	if role == "" {
		return nil, fmt.Errorf("client certificate %q names no durableclaims identity", clip(s.CommonName))
	}
	level := authorization.RoleWriter
	switch role {
	case RoleReader:
		level = authorization.RoleReader
	case RoleOperator:
		level = authorization.RoleAdmin
	}
	c := &authorization.Claims{Subject: s.CommonName, Namespaces: map[string]authorization.Role{}}
	if role == RoleAdmin {
		c.System = authorization.RoleAdmin
	}
	for _, ou := range s.OrganizationalUnit {
		if ns, ok := strings.CutPrefix(ou, "namespace:"); ok && ns != "" {
			c.Namespaces[ns] = level
		}
	}
	return c, nil
}
