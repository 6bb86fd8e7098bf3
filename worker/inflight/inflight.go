// Package inflight lets a worker killed while it held tasks be replaced
// without waiting for the server to notice.
//
// Temporal learns that a worker died from its timeouts: an activity's
// heartbeat timeout (3 s for a claim's effects) and then its retry's
// backoff (1 s), a workflow task's start-to-close timeout (4 s), and for
// each workflow the dead worker held in its cache, the sticky queue's
// schedule-to-start timeout (2 s) while the server still counts the dead
// worker's poller as alive (10 s). That is what lets any worker on any
// host carry on, and it is most of the four seconds a claim interrupted by
// a SIGKILL took to finish.
//
// A worker that is restarted where it ran (a process supervisor, a
// Kubernetes container restarted in its pod with an emptyDir) knows more:
// which tasks its predecessor held when it died. Journal keeps that on
// disk, written by a gRPC interceptor on the worker's connection: a file
// per task the worker polled and has not answered (its task token), and
// the name of its sticky queue. Before its successor polls, HandBack tells
// the server what it would otherwise wait to learn:
//
//   - the predecessor's sticky queue is shut down (ShutdownWorker, as a
//     worker stopping cleanly does), so that the next task of every run
//     it held goes to the shared queue at once;
//   - each workflow task it held fails (RespondWorkflowTaskFailed): the
//     server schedules the next on the shared queue at once;
//   - each activity attempt it held fails with ErrKilled, retryable, with
//     a next-retry delay of a millisecond in place of the retry policy's
//     backoff: the next attempt is dispatched at once, under the same
//     idempotency key, and the receiver's key (Stripe's), the outbox or
//     the store's check-then-act keeps its effect to one.
//
// A token handed back that the server no longer knows (the task completed
// before the kill, timed out, or was already retried) is answered
// NotFound and forgotten. A lost journal entry costs only time: the server
// times the task out as before. Nothing here decides what a claim does.
//
// A task token lets whoever holds it answer that task, so the journal is
// the worker's own: a directory only its user can read (0700, files
// 0600), locked while the worker lives so that two workers never share
// one (the second would hand back the first's live tasks).
package inflight

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrKilled is the failure type of an activity attempt handed back because
// the worker running it was killed.
const ErrKilled = "WorkerKilled"

// handBackConcurrency is how many tasks HandBack hands back at a time: a
// worker held up to its slots' worth.
const handBackConcurrency = 16

// retryAfter replaces the retry policy's backoff for an attempt handed
// back: its worker is gone, not struggling.
const retryAfter = time.Millisecond

// Journal is a worker's record of the tasks it holds.
type Journal struct {
	dir  string
	lock *os.File
	log  *slog.Logger

	mu     sync.Mutex
	sticky string // the sticky queue last written
}

// File name prefixes: an activity task, a workflow task, the sticky queue.
const (
	activityPrefix = "a-"
	workflowPrefix = "w-"
	stickyFile     = "sticky-queue"
	lockFile       = "lock"
)

// Open opens (creating) the journal in dir and locks it for this process:
// a journal another live worker holds is an error.
func Open(dir string, log *slog.Logger) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("task journal %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("task journal %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("task journal %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		f.Close()
		return nil, fmt.Errorf("task journal %s is held by another live worker (pid %s): give each worker a directory of its own", dir, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	return &Journal{dir: dir, lock: f, log: log}, nil
}

// Close releases the journal's lock (a process that dies releases it too).
func (j *Journal) Close() error {
	if j == nil {
		return nil
	}
	return j.lock.Close()
}

func name(prefix string, token []byte) string {
	sum := sha256.Sum256(token)
	return prefix + hex.EncodeToString(sum[:16])
}

func (j *Journal) put(prefix string, token []byte) {
	if len(token) == 0 {
		return
	}
	if err := os.WriteFile(filepath.Join(j.dir, name(prefix, token)), token, 0o600); err != nil {
		j.log.Warn("task journal: not written; a kill now would cost the task's timeout", "error", err)
	}
}

func (j *Journal) drop(prefix string, token []byte) {
	if len(token) == 0 {
		return
	}
	if err := os.Remove(filepath.Join(j.dir, name(prefix, token))); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.log.Warn("task journal: entry not removed", "error", err)
	}
}

const service = "/temporal.api.workflowservice.v1.WorkflowService/"

// Interceptor journals the tasks the worker takes and forgets those it
// answers. It must sit inside any interceptor that changes what the SDK
// is told (worker/parked), so that it sees what the server said.
func (j *Journal) Interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !strings.HasPrefix(method, service) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		// Before the call: its answer may be lost, never the journal's
		// memory of a task still held.
		if r, ok := req.(*workflowservice.PollWorkflowTaskQueueRequest); ok && r.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
			j.stickyQueue(r.GetTaskQueue().GetName())
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		answered := err == nil || isNotFound(err)
		token := func() []byte { return req.(interface{ GetTaskToken() []byte }).GetTaskToken() }
		switch method[len(service):] {
		case "PollActivityTaskQueue":
			if err == nil {
				j.put(activityPrefix, reply.(*workflowservice.PollActivityTaskQueueResponse).GetTaskToken())
			}
		case "PollWorkflowTaskQueue":
			if err == nil {
				j.put(workflowPrefix, reply.(*workflowservice.PollWorkflowTaskQueueResponse).GetTaskToken())
			}
		case "RespondWorkflowTaskCompleted", "RespondWorkflowTaskFailed", "RespondQueryTaskCompleted":
			// (A legacy query comes as a workflow task and is answered
			// with RespondQueryTaskCompleted.)
			if r, ok := reply.(*workflowservice.RespondWorkflowTaskCompletedResponse); ok && err == nil {
				// The run's next workflow task, handed straight back with
				// the answer (the SDK asks for it: a local activity's
				// heartbeat, events that came in meanwhile), and the
				// activities the server dispatched eagerly.
				j.put(workflowPrefix, r.GetWorkflowTask().GetTaskToken())
				for _, t := range r.GetActivityTasks() {
					j.put(activityPrefix, t.GetTaskToken())
				}
			}
			if answered {
				j.drop(workflowPrefix, token())
			}
		case "RespondActivityTaskCompleted", "RespondActivityTaskFailed", "RespondActivityTaskCanceled":
			if answered {
				j.drop(activityPrefix, token())
			}
		case "RecordActivityTaskHeartbeat":
			if isNotFound(err) {
				// The attempt is no longer this worker's (timed out,
				// retried elsewhere): nothing to hand back.
				j.drop(activityPrefix, token())
			}
		}
		return err
	}
}

func (j *Journal) stickyQueue(queue string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if queue == j.sticky {
		return
	}
	if err := os.WriteFile(filepath.Join(j.dir, stickyFile), []byte(queue), 0o600); err != nil {
		j.log.Warn("task journal: sticky queue not written", "error", err)
		return
	}
	j.sticky = queue
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// Report is what HandBack did.
type Report struct {
	StickyQueue         string // the predecessor's sticky queue, shut down ("" none)
	WorkflowTasks       int    // workflow tasks failed back to the server
	ActivityTasks       int    // activity attempts failed back for an immediate retry
	Gone                int    // tokens the server no longer knew
	Errors              int    // tokens not handed back (left to their timeouts)
	Took                time.Duration
	StickyShutdownError error
}

// HandBack gives the server back what a killed predecessor held, as the
// package says, and empties the journal for this worker. Call it before
// the worker polls. A failure to hand a task back is logged and counted:
// the server's timeout still frees it.
func (j *Journal) HandBack(ctx context.Context, svc workflowservice.WorkflowServiceClient, namespace, identity string) Report {
	begin := time.Now()
	var rep Report
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		j.log.Warn("task journal unreadable: nothing handed back", "error", err)
		return rep
	}
	if b, err := os.ReadFile(filepath.Join(j.dir, stickyFile)); err == nil && len(b) > 0 {
		rep.StickyQueue = string(b)
		_, rep.StickyShutdownError = svc.ShutdownWorker(ctx, &workflowservice.ShutdownWorkerRequest{Namespace: namespace,
			StickyTaskQueue: rep.StickyQueue, Identity: identity, Reason: "killed; its successor hands back what it held"})
		_ = os.Remove(filepath.Join(j.dir, stickyFile))
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(handBackConcurrency)
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "-")
		if prefix += "-"; !ok || (prefix != activityPrefix && prefix != workflowPrefix) {
			continue
		}
		path := filepath.Join(j.dir, e.Name())
		g.Go(func() error {
			defer os.Remove(path)
			token, err := os.ReadFile(path)
			if err != nil || len(token) == 0 {
				return nil
			}
			if prefix == activityPrefix {
				err = failActivity(ctx, svc, namespace, identity, token)
			} else {
				err = failWorkflowTask(ctx, svc, namespace, identity, token)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && prefix == activityPrefix:
				rep.ActivityTasks++
			case err == nil:
				rep.WorkflowTasks++
			case isNotFound(err) || isInvalid(err):
				rep.Gone++
			default:
				rep.Errors++
				j.log.Warn("task journal: a task not handed back; its timeout frees it", "error", err)
			}
			return nil
		})
	}
	_ = g.Wait()
	rep.Took = time.Since(begin)
	return rep
}

func isInvalid(err error) bool {
	var ia *serviceerror.InvalidArgument
	return errors.As(err, &ia)
}

func failActivity(ctx context.Context, svc workflowservice.WorkflowServiceClient, namespace, identity string, token []byte) error {
	_, err := svc.RespondActivityTaskFailed(ctx, &workflowservice.RespondActivityTaskFailedRequest{
		Namespace: namespace, TaskToken: token, Identity: identity,
		Failure: &failurepb.Failure{
			Message: "the worker running this attempt was killed; its successor handed it back for an immediate retry",
			Source:  "durableclaims/inflight",
			FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{
				Type: ErrKilled, NextRetryDelay: durationpb.New(retryAfter)}},
		},
	})
	return err
}

func failWorkflowTask(ctx context.Context, svc workflowservice.WorkflowServiceClient, namespace, identity string, token []byte) error {
	_, err := svc.RespondWorkflowTaskFailed(ctx, &workflowservice.RespondWorkflowTaskFailedRequest{
		Namespace: namespace, TaskToken: token, Identity: identity,
		Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE,
		Failure: &failurepb.Failure{
			Message: "the worker running this workflow task was killed; its successor handed it back",
			Source:  "durableclaims/inflight",
			FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{
				Type: ErrKilled}},
		},
	})
	return err
}
