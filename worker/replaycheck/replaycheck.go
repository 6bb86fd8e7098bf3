// Package replaycheck replays what is running now against this build's
// workflow code before the build takes traffic: every open run of the
// namespace and a sample of recently closed ones, each history downloaded
// and replayed with worker.WorkflowReplayer. A run whose replay fails would
// fail the same way on this build (a nondeterminism error, a panic): the
// check names it and the command that diverged, and the deploy stops.
//
// The committed corpus (workflows/testdata/histories, a folder per
// workflow version) says that the paths someone thought of still replay;
// this says that the runs the namespace actually holds do, including the
// ones parked for days under builds long gone.
package replaycheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/workflows"
)

// Options say what to check and how.
type Options struct {
	// TaskQueue is the claims' task queue: every run on it is checked,
	// whatever its type (a type this build no longer registers breaks), and
	// every run of a type this build registers, wherever it runs.
	TaskQueue string
	// Closed is how many of the most recently closed runs to check beside
	// the open ones (0: none).
	Closed int
	// Query narrows the runs (a visibility query, ANDed with the rest).
	Query string
	// Concurrency is how many histories are downloaded and replayed at
	// once; each holds one history in memory. Default: 2 × GOMAXPROCS.
	Concurrency int
	// KeepGoing checks every run instead of stopping at the first that
	// breaks.
	KeepGoing bool
	// Register registers the workflow code to replay against; default
	// workflows.Register, this build's.
	Register func(workflows.Registry)
	// DataConverter and FailureConverter decode the histories (the
	// worker's: with payload encryption, config.Converters); default the
	// SDK's.
	DataConverter    converter.DataConverter
	FailureConverter converter.FailureConverter
	// Progress, when set, gets a line now and then.
	Progress io.Writer
	// Interceptors are the worker's workflow interceptors: a build whose
	// worker adds one replays with it, as it would run.
	Interceptors []interceptor.WorkerInterceptor
}

// Failure is a run this build cannot replay.
type Failure struct {
	WorkflowID, RunID, WorkflowType string
	Status                          string // Running, Completed, …
	// Err is the replay's error, cut to maxErrorText: for a nondeterminism
	// error, the SDK's message says where the code and the history part
	// (and may quote the history's payloads: it is cut, not dropped).
	Err error
	// Event is the history event the error names, as the history holds
	// it ("event 5: ActivityTaskScheduled ScreenClaimant"): the command an
	// older build issued that this one does not. Empty if it names none.
	Event string
}

func (f Failure) String() string {
	s := fmt.Sprintf("%s (run %s, %s, %s): %v", f.WorkflowID, f.RunID, f.WorkflowType, f.Status, f.Err)
	if f.Event != "" {
		s += "; the history has " + f.Event
	}
	return s
}

// Bounds on what a report holds: failures kept (the rest counted) and the
// length of each error's text.
const (
	maxFailures  = 100
	maxErrorText = 600
)

// Report is what a check found.
type Report struct {
	Open, Closed int // runs listed
	Replayed     int // runs replayed to their last completed workflow task
	// Skipped are runs with no completed workflow task yet (just started,
	// or no worker has taken them): nothing to replay. Gone were deleted
	// between the listing and the download.
	Skipped, Gone int
	Events        int64
	Took          time.Duration
	Failures      []Failure
	// FailuresDropped counts failures past the first maxFailures.
	FailuresDropped int
	// Stopped says the check stopped at the first failure (not KeepGoing):
	// runs after it were not checked.
	Stopped bool
}

func (r *Report) fail(f Failure) {
	if len(r.Failures) >= maxFailures {
		r.FailuresDropped++
		return
	}
	if msg := f.Err.Error(); len(msg) > maxErrorText {
		f.Err = errors.New(msg[:maxErrorText] + " …")
	}
	r.Failures = append(r.Failures, f)
}

// Check lists the runs and replays each. An error means the check did not
// finish (the server unreachable, a history unreadable, ctx done): the
// report then holds what it found so far, and a deploy must not read it
// as a pass. Runs that break are in the report.
func Check(ctx context.Context, c client.Client, o Options) (Report, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Register == nil {
		o.Register = workflows.Register
	}
	k := &check{c: c, o: o, begin: time.Now()}
	replayers := make([]worker.WorkflowReplayer, o.Concurrency)
	for i := range replayers {
		r, err := newReplayer(o)
		if err != nil {
			return k.rep, err
		}
		replayers[i] = r
	}
	outer := ctx
	ctx, k.cancel = context.WithCancel(ctx)
	defer k.cancel()
	base := "(" + runsQuery(o.TaskQueue, registered(o.Register)) + ")"
	if o.Query != "" {
		base += " AND (" + o.Query + ")"
	}
	runs := make(chan listedRun, o.Concurrency)
	var listed sync.WaitGroup
	listed.Go(func() { k.list(ctx, base, runs) })
	var wg sync.WaitGroup
	for _, r := range replayers {
		wg.Go(func() { k.replay(ctx, r, runs) })
	}
	stopProgress := progress(o.Progress, &k.done, k.begin)
	wg.Wait()
	listed.Wait()
	stopProgress()
	k.rep.Events, k.rep.Took = k.events.Load(), time.Since(k.begin)
	if k.rep.Stopped {
		return k.rep, nil // what stopped it is in the report
	}
	switch {
	case outer.Err() != nil:
		return k.rep, fmt.Errorf("the check did not finish: %w", outer.Err())
	case k.fetchErr != nil:
		return k.rep, k.fetchErr
	case k.listErr != nil:
		return k.rep, k.listErr
	}
	return k.rep, nil
}

// check is one Check under way: a lister feeding runs to replayers, which
// record what they find in the report.
type check struct {
	c      client.Client
	o      Options
	begin  time.Time
	cancel context.CancelFunc // stops the lister and the replayers
	events atomic.Int64
	done   atomic.Int64

	mu                sync.Mutex // guards what follows
	rep               Report
	listErr, fetchErr error
}

// listedRun is a run the lister found.
type listedRun struct {
	exec   *commonpb.WorkflowExecution
	typ    string
	status enumspb.WorkflowExecutionStatus
}

// list sends the runs base finds to runs, open runs first, then the most
// recently closed, and closes it.
func (k *check) list(ctx context.Context, base string, runs chan<- listedRun) {
	defer close(runs)
	open, err := k.listQuery(ctx, base+` AND ExecutionStatus = "Running"`, 0, runs)
	closed := 0
	if err == nil && k.o.Closed > 0 {
		// Visibility lists closed runs most recently closed first
		// (SQL and Elasticsearch alike; SQL visibility takes no ORDER BY).
		closed, err = k.listQuery(ctx, base+` AND ExecutionStatus != "Running"`, k.o.Closed, runs)
	}
	k.mu.Lock()
	k.rep.Open, k.rep.Closed, k.listErr = open, closed, err
	k.mu.Unlock()
}

// listQuery sends the runs query finds to runs, at most limit (0: all),
// and returns how many it sent.
func (k *check) listQuery(ctx context.Context, query string, limit int, runs chan<- listedRun) (int, error) {
	var token []byte
	n := 0
	for {
		size := int32(1000)
		if limit > 0 {
			size = int32(min(limit-n, 1000))
		}
		resp, err := k.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: size, NextPageToken: token, Query: query})
		if err != nil {
			return n, fmt.Errorf("list runs (%s): %w", query, err)
		}
		for _, ex := range resp.GetExecutions() {
			if limit > 0 && n >= limit {
				return n, nil
			}
			select {
			case runs <- listedRun{ex.GetExecution(), ex.GetType().GetName(), ex.GetStatus()}:
				n++
			case <-ctx.Done():
				return n, ctx.Err()
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 || (limit > 0 && n >= limit) {
			return n, nil
		}
	}
}

// replay replays each run it takes from runs with r, until runs closes.
func (k *check) replay(ctx context.Context, r worker.WorkflowReplayer, runs <-chan listedRun) {
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for ru := range runs {
		res := replayOne(ctx, k.c, r, quiet, ru.exec)
		k.events.Add(res.events)
		k.done.Add(1)
		k.record(ctx, ru, res)
	}
}

// record counts what replaying a run gave; a run that breaks stops the
// check unless KeepGoing, and a history it could not read stops it.
func (k *check) record(ctx context.Context, ru listedRun, res replayed) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case res.fetchErr != nil:
		if k.fetchErr == nil && ctx.Err() == nil {
			k.fetchErr = res.fetchErr
		}
		k.cancel()
	case res.gone:
		k.rep.Gone++
	case res.skipped:
		k.rep.Skipped++
	case res.err != nil:
		k.rep.Replayed++
		k.rep.fail(Failure{WorkflowID: ru.exec.GetWorkflowId(), RunID: ru.exec.GetRunId(),
			WorkflowType: ru.typ, Status: ru.status.String(), Err: res.err, Event: res.event})
		if !k.o.KeepGoing {
			k.rep.Stopped = true
			k.cancel()
		}
	default:
		k.rep.Replayed++
	}
}

func newReplayer(o Options) (worker.WorkflowReplayer, error) {
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		DataConverter: o.DataConverter, FailureConverter: o.FailureConverter, Interceptors: o.Interceptors})
	if err != nil {
		return nil, err
	}
	o.Register(r)
	return r, nil
}

// replayed is what replaying one run gave.
type replayed struct {
	events        int64
	skipped, gone bool
	fetchErr      error  // the history could not be read
	err           error  // the replay failed: the run would break
	event         string // the history event err names
}

// replayOne downloads one run's history and replays it. A replay that
// fails on the SDK's deadlock detector (TMPRL1101: a workflow task that
// took over a second of wall time, which a busy machine can cause) is
// tried once more before it counts.
func replayOne(ctx context.Context, c client.Client, r worker.WorkflowReplayer, logger log.Logger, ex *commonpb.WorkflowExecution) replayed {
	it := c.GetWorkflowHistory(ctx, ex.GetWorkflowId(), ex.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			var gone *serviceerror.NotFound
			if errors.As(err, &gone) {
				return replayed{gone: true}
			}
			return replayed{fetchErr: fmt.Errorf("history of %s (run %s): %w", ex.GetWorkflowId(), ex.GetRunId(), err)}
		}
		h.Events = append(h.Events, ev)
	}
	res := replayed{events: int64(len(h.Events))}
	if !hasCompletedTask(h) {
		res.skipped = true
		return res
	}
	opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: ex.GetWorkflowId(), RunID: ex.GetRunId()}}
	err := r.ReplayWorkflowHistoryWithOptions(logger, h, opts)
	if err != nil && strings.Contains(err.Error(), "TMPRL1101") {
		err = r.ReplayWorkflowHistoryWithOptions(logger, h, opts)
	}
	if err != nil {
		res.err, res.event = err, namedEvent(h, err)
	}
	return res
}

// hasCompletedTask says whether a history holds a completed workflow task:
// before the first, there is no command to check (and the SDK's replayer
// refuses a history that short).
func hasCompletedTask(h *historypb.History) bool {
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}

// eventRef finds the event ID an SDK replay error names, in the forms the
// SDK (v1.51) writes it with: "scheduleEventID: 5", "scheduledEventID: 5",
// "event ID: 7", "eventID: 7". Other messages name no event.
var eventRef = regexp.MustCompile(`(?:scheduleEventID|scheduledEventID|event ID|eventID): (\d+)`)

// namedEvent describes the history event err names: its ID, type and what
// it was for (the activity, timer, marker, signal).
func namedEvent(h *historypb.History, err error) string {
	m := eventRef.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	for _, ev := range h.GetEvents() {
		if ev.GetEventId() != id {
			continue
		}
		what := ev.GetEventType().String() // "ActivityTaskScheduled"
		var name string
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			name = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case ev.GetMarkerRecordedEventAttributes() != nil:
			name = ev.GetMarkerRecordedEventAttributes().GetMarkerName()
		case ev.GetTimerStartedEventAttributes() != nil:
			name = "timer " + ev.GetTimerStartedEventAttributes().GetTimerId()
		case ev.GetWorkflowExecutionSignaledEventAttributes() != nil:
			name = ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
		case ev.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil:
			name = ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowType().GetName()
		}
		if name != "" {
			what += " " + name
		}
		return fmt.Sprintf("event %d: %s", id, what)
	}
	return ""
}

// registered are the workflow type names a registration gives.
func registered(register func(workflows.Registry)) []string {
	var names typeNames
	register(&names)
	return names
}

type typeNames []string

func (t *typeNames) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*t = append(*t, o.Name)
}

// runsQuery is the visibility query for the runs to check: those on the
// task queue, and those of the registered types.
func runsQuery(queue string, types []string) string {
	var terms []string
	if queue != "" {
		terms = append(terms, fmt.Sprintf("TaskQueue = %q", queue))
	}
	for _, t := range types {
		terms = append(terms, fmt.Sprintf("WorkflowType = %q", t))
	}
	return strings.Join(terms, " OR ")
}

// progress writes "replayed N runs" every 5 s until stopped.
func progress(w io.Writer, done *atomic.Int64, begin time.Time) func() {
	if w == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				n := done.Load()
				fmt.Fprintf(w, "replay-check: %d runs replayed, %.0f a second\n", n, float64(n)/time.Since(begin).Seconds())
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

// CheckFiles replays history files (the JSON `temporal workflow show
// --output json` and `make histories` write, each named after its workflow
// ID) against the code o.Register gives: the committed corpus in CI, or
// histories an operator exported. o.Namespace, Closed and Query do not
// apply.
func CheckFiles(paths []string, o Options) (Report, error) {
	if o.Register == nil {
		o.Register = workflows.Register
	}
	begin := time.Now()
	var rep Report
	r, err := newReplayer(o)
	if err != nil {
		return rep, err
	}
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, path := range paths {
		h, err := readHistory(path)
		if err != nil {
			return rep, err
		}
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		rep.Events += int64(len(h.GetEvents()))
		if !hasCompletedTask(h) {
			rep.Skipped++
			continue
		}
		rep.Replayed++
		first := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
		err = r.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}})
		if err != nil {
			rep.fail(Failure{WorkflowID: id, RunID: path, WorkflowType: first.GetWorkflowType().GetName(),
				Status: "file", Err: err, Event: namedEvent(h, err)})
			if !o.KeepGoing {
				rep.Stopped = true
				break
			}
		}
	}
	rep.Took = time.Since(begin)
	return rep, nil
}

// HistoryFiles are the history files (*.json) in dir and in its folders
// one level down: the committed corpus keeps a folder per workflow version
// (workflows/testdata/histories/<version>/), an export may be flat.
func HistoryFiles(dir string) ([]string, error) {
	flat, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	shelved, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	return append(flat, shelved...), err
}

func readHistory(path string) (*historypb.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(h.GetEvents()) == 0 || h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes() == nil {
		return nil, fmt.Errorf("%s: not a workflow history (no start event first)", path)
	}
	return h, nil
}
