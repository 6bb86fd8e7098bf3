// Package provenance tells a claim's history written by the insurer's
// workers from history written by anyone else.
//
// On a Temporal server that is not the insurer's own, whoever reaches the
// frontend can take a claim's workflow task and answer it with commands of
// their choosing: schedule a payment, start a timer, upsert a status. The
// effects refuse what the system of record does not allow, but the run's
// history now holds commands the claim's code never issued, and the next
// worker to replay it fails with a nondeterminism error, forever.
//
// Interceptor signs every workflow task completion this worker sends: an
// HMAC of the namespace, the run and the task's started event, under a key
// derived (HKDF) from the payload key ring, appended to the completion's
// identity, which the server records in the WorkflowTaskCompleted event.
// Nobody without the keys can make one, and none is valid for another
// task. When the SDK fails a task as nondeterministic, the interceptor
// reads the run's history and checks every completion (Check): one without
// a valid signature was not written by this deployment, and the run is
// handed to Tampered, which dead-letters it (worker/main.go). A
// nondeterminism error with every completion signed is this deployment's
// own (a bad build) and is left to the operator's replay check and
// rollback, as before.
package provenance

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/durableclaims/durableclaims/internal/codec"
)

// TamperedReason begins the termination reason of a run dead-lettered for
// holding a completion this deployment did not write.
const TamperedReason = "tampered:"

// mark begins the signature in a completion's identity.
const mark = " wts="

// info separates this key's use from the payload key it is derived from.
const info = "durableclaims/workflow-task-signature/v1"

// Signer signs and checks workflow task completions with keys derived
// from a payload key ring: the active key signs, any key of the ring
// checks (a rotation keeps older histories checkable).
type Signer struct {
	active string
	keys   map[string][]byte
}

// NewSigner derives the signing keys from kr.
func NewSigner(kr *codec.Keyring) (*Signer, error) {
	if err := kr.Validate(); err != nil {
		return nil, err
	}
	s := &Signer{active: kr.Active, keys: map[string][]byte{}}
	for id, k := range kr.Keys {
		dk, err := hkdf.Key(sha256.New, k, nil, info, 32)
		if err != nil {
			return nil, fmt.Errorf("provenance: key %q: %w", id, err)
		}
		s.keys[id] = dk
	}
	return s, nil
}

// Task names one workflow task: the run and its started event.
type Task struct {
	Namespace, WorkflowID, RunID string
	StartedEventID               int64
}

func (s *Signer) mac(keyID string, t Task) []byte {
	m := hmac.New(sha256.New, s.keys[keyID])
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%d", t.Namespace, t.WorkflowID, t.RunID, t.StartedEventID)
	return m.Sum(nil)
}

// Sign returns identity with t's signature appended (an earlier one
// replaced).
func (s *Signer) Sign(identity string, t Task) string {
	identity, _, _ = strings.Cut(identity, mark)
	return identity + mark + s.active + "." + base64.RawURLEncoding.EncodeToString(s.mac(s.active, t))
}

// Signed says whether identity carries a signature, and whether it is a
// valid one for t.
func (s *Signer) Signed(identity string, t Task) (present, valid bool) {
	_, sig, ok := strings.Cut(identity, mark)
	if !ok {
		return false, false
	}
	keyID, b64, ok := strings.Cut(sig, ".")
	if _, known := s.keys[keyID]; !ok || !known {
		return true, false
	}
	got, err := base64.RawURLEncoding.DecodeString(b64)
	return true, err == nil && hmac.Equal(got, s.mac(keyID, t))
}

// Finding is what Check found in a history.
type Finding struct {
	// Foreign is the first completion this deployment did not write, nil
	// when every one it can judge is its own. A reset to it drops it and
	// all that followed, and the workflow task it answered is done again,
	// by the claim's code.
	Foreign *historypb.HistoryEvent
}

// Reason says what Foreign is, for a log line, a refusal and a dead
// letter's termination reason, which names the event to reset to
// (TrustedUntil reads it back).
func (f Finding) Reason() string {
	if f.Foreign == nil {
		return ""
	}
	who, _, _ := strings.Cut(f.Foreign.GetWorkflowTaskCompletedEventAttributes().GetIdentity(), mark)
	return fmt.Sprintf("%s the workflow task completed at event %d (by %q) carries no signature of this deployment: its commands are not the claim's code%s%d",
		TamperedReason, f.Foreign.GetEventId(), clip(who), resetMark, f.Foreign.GetEventId())
}

const resetMark = "; reset to event "

// ResetPoint reads, from a tampered run's termination reason, the event to
// reset the run to: the stranger's completion, which the reset drops with
// all that followed (claimsctl dlq redrive).
func ResetPoint(reason string) (int64, bool) {
	if !strings.HasPrefix(reason, TamperedReason) {
		return 0, false
	}
	i := strings.LastIndex(reason, resetMark)
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(reason[i+len(resetMark):], 10, 64)
	return n, err == nil && n > 0
}

// Check judges every workflow task completion of a run's history. A run
// started before signing began (since; zero: never) may hold unsigned
// completions of older builds before its first signed one; after that,
// and in any run started since, every completion must be signed. Events a
// reset copied from an earlier run are checked against the run that wrote
// them.
func (s *Signer) Check(events []*historypb.HistoryEvent, namespace, workflowID, runID string, since time.Time) Finding {
	var f Finding
	strict := false
	if len(events) > 0 && !since.IsZero() {
		strict = !events[0].GetEventTime().AsTime().Before(since)
	}
	// The run each event was written in: a reset's WorkflowTaskFailed
	// (cause RESET_WORKFLOW) ends the events copied from its base run.
	writer := make([]string, len(events))
	current := runID
	for i := len(events) - 1; i >= 0; i-- {
		writer[i] = current
		if a := events[i].GetWorkflowTaskFailedEventAttributes(); a != nil && a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			current = a.GetBaseRunId()
		}
	}
	for i, e := range events {
		a := e.GetWorkflowTaskCompletedEventAttributes()
		if a == nil {
			continue
		}
		present, valid := s.Signed(a.GetIdentity(), Task{Namespace: namespace, WorkflowID: workflowID, RunID: writer[i], StartedEventID: a.GetStartedEventId()})
		switch {
		case valid:
			strict = true
		case !present && !strict:
			// an older build's, before any signed one
		default:
			f.Foreign = e
			return f
		}
	}
	return f
}

// Tampered is called, once per run, when a run's history holds a
// completion this deployment did not write.
type Tampered func(ctx context.Context, t Task, f Finding)

// History reads a run's whole history.
type History func(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, error)

// Interceptor is a gRPC client interceptor for the worker's connection:
// it signs every workflow task completion, and checks the history of a
// run whose task the SDK fails as nondeterministic, calling tampered when
// a stranger wrote part of it. since is when signing began (Check).
func (s *Signer) Interceptor(history History, since func(context.Context) time.Time, tampered Tampered, logf func(string, ...any)) grpc.UnaryClientInterceptor {
	ix := &interceptor{s: s, history: history, since: since, tampered: tampered, logf: logf,
		tasks: map[string]polled{}, checked: map[string]bool{}}
	return ix.intercept
}

type interceptor struct {
	s        *Signer
	history  History
	since    func(context.Context) time.Time
	tampered Tampered
	logf     func(string, ...any)

	mu      sync.Mutex
	tasks   map[string]polled // by task token: tasks polled, not yet answered
	checked map[string]bool   // runs already checked after a failure
}

type polled struct {
	Task
	at time.Time
}

// maxTasks bounds the tasks remembered: a worker holds at most its
// workflow task slots at once; a token the SDK never answers (a worker
// stopping) must not pile up. At the bound, tokens older than staleAfter
// go: no workflow task lives that long (its timeout is seconds), and one
// still in flight must keep its token, or its completion goes unsigned.
const (
	maxTasks   = 4096
	staleAfter = 10 * time.Minute
	maxChecked = 10_000 // a run forgotten is only checked again
)

func (ix *interceptor) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch r := req.(type) {
	case *workflowservice.RespondWorkflowTaskCompletedRequest:
		if t, ok := ix.task(r.GetTaskToken(), !r.GetIntermediatePage()); ok {
			r.Identity = ix.s.Sign(r.GetIdentity(), t)
		}
	case *workflowservice.RespondWorkflowTaskFailedRequest:
		t, ok := ix.task(r.GetTaskToken(), true)
		if ok && r.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR {
			go ix.check(t)
		}
	case *workflowservice.RespondQueryTaskCompletedRequest:
		ix.task(r.GetTaskToken(), true) // a query-only task, answered: no completion follows
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch r := reply.(type) {
	case *workflowservice.PollWorkflowTaskQueueResponse:
		ix.remember(req, r)
	case *workflowservice.RespondWorkflowTaskCompletedResponse:
		if next := r.GetWorkflowTask(); next != nil {
			ix.remember(req, next)
		}
	}
	return nil
}

func (ix *interceptor) remember(req any, r *workflowservice.PollWorkflowTaskQueueResponse) {
	if len(r.GetTaskToken()) == 0 {
		return
	}
	ns := ""
	if n, ok := req.(interface{ GetNamespace() string }); ok {
		ns = n.GetNamespace()
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	now := time.Now()
	if len(ix.tasks) >= maxTasks {
		maps.DeleteFunc(ix.tasks, func(_ string, p polled) bool { return now.Sub(p.at) > staleAfter })
	}
	ix.tasks[string(r.GetTaskToken())] = polled{Task: Task{Namespace: ns, WorkflowID: r.GetWorkflowExecution().GetWorkflowId(),
		RunID: r.GetWorkflowExecution().GetRunId(), StartedEventID: r.GetStartedEventId()}, at: now}
}

// task is the task a token names; done forgets it.
func (ix *interceptor) task(token []byte, done bool) (Task, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	p, ok := ix.tasks[string(token)]
	if ok && done {
		delete(ix.tasks, string(token))
	}
	return p.Task, ok
}

func (ix *interceptor) check(t Task) {
	run := t.WorkflowID + "/" + t.RunID
	ix.mu.Lock()
	if ix.checked[run] {
		ix.mu.Unlock()
		return
	}
	if len(ix.checked) >= maxChecked {
		clear(ix.checked)
	}
	ix.checked[run] = true
	ix.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := ix.history(ctx, t.WorkflowID, t.RunID)
	if err != nil {
		ix.logf("provenance: history of %s not read: %v", run, err)
		ix.forget(run)
		return
	}
	f := ix.s.Check(events, t.Namespace, t.WorkflowID, t.RunID, ix.since(ctx))
	if f.Foreign == nil {
		ix.logf("provenance: %s failed replay with every completion signed by this deployment: a build of its own is nondeterministic", run)
		return
	}
	ix.tampered(ctx, t, f)
}

// forget lets a run be checked again (its history could not be read).
func (ix *interceptor) forget(run string) {
	ix.mu.Lock()
	delete(ix.checked, run)
	ix.mu.Unlock()
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
