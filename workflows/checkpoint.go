package workflows

import (
	"errors"
	"hash/fnv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
)

// The checkpoint rule (docs/design.md, "The checkpoint rule").
//
// Every history event is a write on the server and a billed action, so a
// step is a regular activity (three events, then a workflow task) only where
// a crash must not cost more than that step. Otherwise it is a local
// activity: one marker, recorded when the workflow task that ran it
// completes. A worker that dies mid-task loses every local result of that
// task, and the next worker runs them all again. That is free for a read,
// but not for a model call or a side effect. Hence the rule:
//
//	a costly local result must be recorded before the next costly step runs.
//
// It is kept by the plan below, one row per kind of step, and by the pending
// field of claimRun, which names the costly local result the current task
// has not yet recorded (if any). A row says how its step runs:
//
//	local     always a local activity: cheap to repeat (a read, a tool call)
//	regular   always a regular activity: its own checkpoint
//	costly    a costly local activity when nothing costly is pending, else
//	          its regular form, which records the pending result first
//
// So which form a costly step takes depends on the step before it, and the
// call site says so by naming a costly row. On the auto-approve path with a
// model that is not free to repeat:
//
//	step 1 intake   local    LoadClaim
//	step 2 triage   costly   TriageTurn 1: local (nothing pending)
//	                local    CallTool × 3 (turn 1 still pending)
//	                costly   TriageTurn 2: regular (turn 1 pending), and so on
//	step 3 coverage          workflow code
//	step 4 assess   regular  AssessClaim: records the last triage turn
//	step 6 pay      regular  PayClaimant: money, its own checkpoint
//	step 7 notify   costly   NotifyClaimant: local (pay recorded everything)
//	step 8 close    record   CloseClaim: local
//	step 9 audit    record   WriteAudit: local; the completion records all three
//
// A record is a keyed write to the claims system of record whose repeat
// returns the first result (the close answers with the original close
// time, the audit write with the original digest): free to repeat, so it
// is neither costly nor a checkpoint, and steps 7-9 end the claim in one
// workflow task. If that task is lost, the next runs all three again: the
// outbox finds the e-mail sent, the close and the audit replay. (Runs
// before versionRecords closed with a regular activity, which recorded the
// e-mail first, and audited as a costly side step.)
//
// With the rules model, whose turns are free to repeat (a result that says
// so, see freeToRepeat), every triage turn runs local, and from
// versionFreeAssess the assessment too (plan.freeModel, assessPlan): the
// payment's schedule records intake, triage and the assessment in one
// workflow task's completion, and a lost task asks the rules again, which
// costs nothing and answers the same. An approval adds
// step 5: OpenApproval (local), the wait (a task boundary: nothing is
// pending after it), the reminder and the escalation notice (plan.notice,
// costly, from versionLocalNotices on; regular before), the re-read
// (local). A notice comes after the wait's timer fired, which is a task
// boundary too (approvals.Hooks.TimerFired): so each runs local in the
// task the timer woke, and an escalation is one workflow task. When the
// escalation was already due as the reminder ran (no timer between them),
// the reminder's result is pending and the escalation runs regular; a
// notice whose quick local attempts fail is sent regular (approvalNotice).
// With a model that costs, the task that schedules the payment runs no
// model call, so a redrive of a failed payment repeats none; with the
// rules model it asks the rules again (which, had the rules' assessment
// failed over to a paid fallback, answer in the fallback's place: the
// payout may differ from the dead-lettered run's, never paid twice).
//
// What a workflow task decides is pending too until it is recorded: a
// person's decision or an expiry (waited, from versionDecided on) and a
// decision of the rules (ruled, from versionProvenance on). So after a
// rejection the claimant's e-mail runs regular, and the audit record that
// names the decision, its time and its build, is rebuilt the same if the
// last task runs again.
//
// Changing a row, or the order of costly steps, changes which commands a
// run issues: it goes behind workflow.GetVersion like any such change.
type how int

const (
	runLocal how = iota
	runRegular
	runCostly
)

func (h how) String() string {
	return [...]string{"local", "regular", "costly"}[h]
}

// stepPlan is one row: how the step runs and the options of each form.
type stepPlan struct {
	name   string
	how    how
	local  *workflow.LocalActivityOptions
	remote *workflow.ActivityOptions
	// beside: the step runs in a goroutine beside the claim's own line
	// (a letter while the claim waits). Its regular form completing says
	// nothing of what that line left pending in the same task, so it
	// never clears pending; its local form marks it, as any costly step.
	beside bool
}

// Task priority (Temporal's, 1 highest, 3 the default, 5 the lowest): in a
// surge the activity queue backs up with model calls of new claims, and a
// payment an adjuster just approved must not wait behind them. So the
// effects (the payment, the ledger close of older runs, reminders and
// escalations, the claimant's e-mail) run at priority 1 and the model
// calls at 4; a local activity has no queue to wait in. With eager
// activity execution on (testbed/serversettings), an activity whose
// worker has a free slot starts at once and skips the queue: priority
// orders the ones that find the slots full. Priority is not
// part of the command sequence a replay checks: changing it needs no
// version.
var (
	priorityEffect = temporal.Priority{PriorityKey: 1}
	priorityModel  = temporal.Priority{PriorityKey: 4}
)

// A local activity's ScheduleToCloseTimeout bounds all its attempts together
// and defaults to its StartToCloseTimeout: left unset, one slow attempt
// would use up the whole budget and fail the step with no retry. Each is
// therefore set to leave room for the retry policy's attempts.
var (
	modelRegular = &workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    3 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 6},
		Priority: priorityModel,
	}
	effectRegular = &workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    3 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 20},
		Priority: priorityEffect,
	}
	// modelLocal is a model call run as a local activity.
	modelLocal = &workflow.LocalActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute,
		RetryPolicy:            modelRegular.RetryPolicy,
	}
	// effectLocal is a side effect or a record run as a local activity.
	effectLocal = &workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 15 * time.Minute,
		RetryPolicy:            effectRegular.RetryPolicy,
	}
)

// plan is the checkpoint rule, row by row.
var plan = struct {
	read, tool     stepPlan // local
	record         stepPlan // local: a keyed write whose repeat returns the first result
	model, effect  stepPlan // regular
	freeModel      stepPlan // costly: the assessment after free triage answers
	turn, sideStep stepPlan // costly
	notice         stepPlan // costly: a wait's reminder and escalation notice
	letter         stepPlan // costly, beside: a letter to the claimant while the claim waits
	queue          stepPlan // local: the approval queue, a projection
}{
	// The approval queue: a projection the healer mends, so a write that
	// keeps failing gives up within a minute rather than hold the wait.
	queue: stepPlan{name: "queue", how: runLocal, local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, MaximumAttempts: 5},
	}},
	// Reads: intake, the approver directory, the re-read after a wait.
	read: stepPlan{name: "read", how: runLocal, local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	}},
	// The triage agent's tools: reads, or an idempotent flag keyed by turn.
	tool: stepPlan{name: "tool", how: runLocal, local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	}},
	// The assessment: the boundary that checkpoints triage.
	model: stepPlan{name: "model", how: runRegular, remote: modelRegular},
	// The assessment of a run whose triage answers were free to ask for
	// again (from versionFreeAssess): asked of the same model, so costly,
	// local when nothing is pending. A fallback's answer is not free, and
	// is pending until the payment's schedule records it.
	freeModel: stepPlan{name: "model", how: runCostly, remote: modelRegular, local: modelLocal},
	// Money and the ledger close: each its own checkpoint, its own heartbeat.
	effect: stepPlan{name: "effect", how: runRegular, remote: effectRegular},
	// A triage turn (and the single triage call of older runs).
	turn: stepPlan{name: "turn", how: runCostly, remote: modelRegular, local: modelLocal},
	// Keyed writes to the system of record: the close and the audit record.
	record: stepPlan{name: "record", how: runLocal, local: effectLocal},
	// The claimant's e-mail (and the audit record of runs before versionRecords).
	sideStep: stepPlan{name: "side effect", how: runCostly, remote: effectRegular, local: effectLocal},
	// A wait's reminder and escalation notice (from versionLocalNotices on):
	// local for as long as a workflow task runs without a heartbeat (3.2 s
	// of its 4 s timeout), a few quick attempts; a mail relay slow or down
	// beyond that gets the regular form instead (approvalNotice), whose
	// retries cost no workflow task each. Locally, every retry past a few
	// seconds is a timer and a workflow task, and a slow attempt holds the
	// task open, heartbeating.
	notice: stepPlan{name: "notice", how: runCostly, remote: effectRegular, local: noticeLocal},
	// An acknowledgment or status letter (versionLaw, law.go): as a notice,
	// local in the task that opened the wait or that its timer woke, so a
	// parked claim has no task left to come; but it runs in a goroutine.
	letter: stepPlan{name: "letter", how: runCostly, remote: effectRegular, local: noticeLocal, beside: true},
}

// besideLine is the plan's row run in a goroutine beside the claim's line.
func (p stepPlan) besideLine() stepPlan {
	p.beside = true
	return p
}

// noticeLocal is the local form of a notice or a letter.
var noticeLocal = &workflow.LocalActivityOptions{
	StartToCloseTimeout:    3 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
		MaximumInterval: 2 * time.Second, MaximumAttempts: 3},
}

// runsLocal says which form a step takes now: local unless the plan says
// regular, or it is costly and a costly local result is pending.
func (p stepPlan) runsLocal(pending string) bool {
	switch p.how {
	case runLocal:
		return true
	case runCostly:
		return pending == ""
	}
	return false
}

func (p stepPlan) retry(local bool) temporal.RetryPolicy {
	if local {
		return *p.local.RetryPolicy
	}
	return *p.remote.RetryPolicy
}

// assessPlan is the assessment's row: its own checkpoint, unless (from
// versionFreeAssess on) the triage's answers were free to ask for again,
// and so, from the same model, is the assessment's: then a costly step,
// local in the task that schedules what follows. A crash before that task
// completes asks the rules again, which costs nothing and answers the
// same; a run reset to that task (claimsctl dlq redrive after a failed
// payment) asks them again too.
func (r *claimRun) assessPlan() stepPlan {
	if r.since.freeAssess && r.freeAnswers {
		return plan.freeModel
	}
	return plan.model
}

// freeToRepeat is implemented by results that cost nothing to ask for again
// and give the same answer (the rules model's turns): such a result need
// not be recorded before the next costly step.
type freeToRepeat interface{ FreeToRepeat() bool }

// ran notes a step that completed in the current workflow task: a costly
// local result is now pending, and a regular activity recorded whatever was.
func (r *claimRun) ran(p stepPlan, local bool, out any) {
	if !p.beside {
		r.unrecorded = local // a regular step's schedule records what ran before it
	}
	switch {
	case !local && p.beside:
	case !local:
		r.pending = ""
	case p.how == runCostly:
		if f, ok := out.(freeToRepeat); ok && f.FreeToRepeat() {
			return
		}
		r.pending = p.name
	}
}

// taskBoundary notes that the workflow waited (for a decision, a timer):
// the task that ran before the wait completed, so everything is recorded.
func (r *claimRun) taskBoundary() { r.pending, r.unrecorded = "", false }

// waited notes that an approval wait ended in the current workflow task.
// What came before the wait is recorded; what this task decided is not: a
// decision and the attempts carry this task's clock (workflow.Now), and a
// task run again after a crash reads another. So from versionDecided on the
// decision is pending like a costly local result: the next costly step
// (the claimant's e-mail after a rejection) runs in its regular form and
// records it before a record (the audit) embeds it. Before, a kill after the
// audit of a rejection left a record the next task rebuilt with other times,
// and the write-once audit refused it.
//
// From versionLocalNotices on a local notice may have run in the task the
// wait ends in (a reminder, then a decision in the same task): clearing
// its pending result is safe only because every such run also has
// since.decided, which sets pending again at once.
//
// From versionFreeAssess the task is also taken to hold unrecorded local
// steps: a notice or a re-read may have run in it before the wait ended,
// and which did cannot be told from here; a dead letter then files its
// claim file after them (fileDeadLetter), at the cost of one activity.
func (r *claimRun) waited() {
	r.taskBoundary()
	if r.since.decided {
		r.pending = "decision"
	}
	r.unrecorded = r.since.freeAssess
}

// ruled notes that the rules decided the outcome in the current workflow
// task (the auto-approve limit, a rejection by coverage or assessment).
// From versionProvenance on the decision names the build that made it:
// this task's, which reaches history only when the task completes. So the
// decision is pending like a person's (waited): the next costly step (the
// claimant's e-mail after a rejection) runs in its regular form and records
// the task before a record (the audit) names its build. Otherwise a task
// run again by another build after a crash would name another build, and
// the write-once audit would refuse the record. (After an auto-approval the
// payment, a regular activity, records the task anyway.)
func (r *claimRun) ruled() {
	if r.since.provenance {
		r.pending = "decision"
	}
}

// The step runner: every activity of the run goes through exec, which
// applies the plan row it names.

// exec runs one activity under the run's caps: it refuses to start past the
// age or step cap, gives the activity no more retries than steps are left,
// and counts the attempts it took. A model step that hands back a wait for
// capacity (budgetWait) is run again after it, on a durable timer: no
// worker is held, and neither the retries nor the step cap count it.
func (r *claimRun) exec(ctx workflow.Context, p stepPlan, fn, in any, out interface{ Attempts() int32 }) error {
	var rounds int
	var waited time.Duration
	var down outageWait
	for {
		err := r.execOnce(ctx, p, fn, in, out)
		if dep, attempt, ok := dependencyDown(err); ok && r.since.outageWaits {
			if err := r.waitOut(ctx, p, &down, dep, attempt, err); err != nil {
				return err
			}
			continue
		}
		r.waitingOn = ""
		wait, attempt, ok := budgetWait(err)
		if !ok || !r.since.budgetWaits {
			return err
		}
		// The attempts before the one that handed the wait back ran (and
		// failed): they count like any other.
		r.stepsExecuted += int(max(attempt-1, 0))
		if rounds >= maxBudgetRounds || waited >= maxBudgetWaitPerStep {
			return capErr(CapModelCapacity, "the %s step waited %s for model capacity over %d waits; the last: %v", p.name, waited, rounds, err)
		}
		rounds++
		waited += wait
		workflow.GetLogger(ctx).Info("no model capacity: waiting", "step", p.name, "wait", wait, "waits", rounds)
		if err := workflow.Sleep(ctx, wait); err != nil {
			return err
		}
		r.taskBoundary()
	}
}

// outageWait is one step's waits for a dependency that is down.
type outageWait struct {
	rounds int
	waited time.Duration
	// since is when the step first found a dependency down (from
	// versionOutageGrid): its place on the grid, and the start of its day.
	// Unlike the status's waiting_since it survives a wait for model
	// capacity between two outage waits.
	since time.Time
}

// waitOut waits for a dependency the step found down (DependencyDown):
// 30 s doubling to 4 min, each a tenth longer or shorter by the claim, for
// a blip; then on the grid every waiting claim shares (outageWake), where
// the claim that has waited longest comes back first. For up to a day per
// step; then the claim stops with a cap (dead-lettered, redrivable). The
// attempts that found it down are not the claim's doing and do not count
// against its step cap: the day, and at most 400 waits (some 4,000 history
// events), bound them. The wait holds no worker.
func (r *claimRun) waitOut(ctx workflow.Context, p stepPlan, w *outageWait, dep string, attempt int32, err error) error {
	now := workflow.Now(ctx)
	if r.since.outageGrid {
		if w.since.IsZero() {
			w.since = now
		}
		w.waited = now.Sub(w.since) // what the clock says, whatever each wait was
	}
	if w.rounds >= maxOutageRounds || w.waited >= maxOutageWaitPerStep {
		r.waitingOn = ""
		return capErr(CapDependency, "the %s step waited %s for %s over %d waits; the last: %v", p.name, w.waited, dep, w.rounds, err)
	}
	if r.waitingOn != dep {
		r.waitingOn, r.waitingSince = dep, now
		metrics.Count(ctx, metrics.DependencyWaits, map[string]string{"dependency": dep})
	}
	var wait time.Duration
	if r.since.outageGrid {
		wait = outageWake(r.workflowID, w.rounds, w.since, now)
	} else {
		wait = outageBackoff(r.workflowID, w.rounds)
		w.waited += wait
	}
	w.rounds++
	workflow.GetLogger(ctx).Warn("dependency down: waiting", "step", p.name, "dependency", dep, "attempt", attempt, "wait", wait, "waits", w.rounds, "since", r.waitingSince)
	if err := workflow.Sleep(ctx, wait); err != nil {
		return err
	}
	r.taskBoundary()
	return nil
}

// The bounds of a step's waits for a dependency that is down: a day, or
// 400 waits, whichever comes first (at 5 min a wait, a day is 290 waits).
const (
	maxOutageWaitPerStep = 24 * time.Hour
	maxOutageRounds      = 400
	firstOutageWait      = 30 * time.Second
	maxOutageWait        = 5 * time.Minute
)

// The grid the long waits share (outageWake): a tick every outageTick from
// the zero time, the same instants for every claim on every worker. Each
// tick opens with a sweep of outageSweep through the waiting claims, the
// longest waiting first: the sweep is spread over the last outageHorizon
// of waiting (a minute longer is half a second earlier), and a claim that
// has waited longer than that is at its head. Up to outageTieBreak more,
// by the claim's ID, parts the claims that began waiting in the same
// half minute (a surge parked at once). A wait is at least minGridWait.
//
// A dependency back in the four minutes between sweeps finds the claims in
// the order they began waiting; back during one, the rest of that sweep
// comes first and the claims it had passed follow at the next tick. The
// sweep orders the claims; the rate limits pace them (the model's shared
// budget, STRIPE_REQUESTS_PER_SECOND): a surge parked together sits in a
// few seconds of the sweep and queues behind them in its order.
const (
	gridFromRound  = 4
	outageTick     = maxOutageWait
	outageSweep    = time.Minute
	outageHorizon  = 2 * time.Hour
	outageTieBreak = 250 * time.Millisecond
	minGridWait    = firstOutageWait
)

// outageWake is how long claim id waits, now, before its step tries a
// dependency that was down again, on its round'th wait of a stretch that
// began at since. The first waits are for a blip (outageBackoff). From
// the fifth on, a claim waits for its place in the next tick of the shared
// grid (outageTick), and its place in the tick's sweep is set by how long
// it has waited: when the dependency is back, the claims that have waited
// longest find it first, and the rest follow them through the sweep
// instead of all at once.
// A pure function of the run's recorded clock: the same on every replay.
func outageWake(id string, round int, since, now time.Time) time.Duration {
	if round < gridFromRound {
		return outageBackoff(id, round)
	}
	for tick := now.Truncate(outageTick); ; tick = tick.Add(outageTick) {
		if at := tick.Add(outagePlace(id, tick.Sub(since))); at.Sub(now) >= minGridWait {
			return at.Sub(now)
		}
	}
}

// outagePlace is the place in a tick of claim id that has waited age by
// the tick: earlier the longer it waited, then a little by its ID.
func outagePlace(id string, age time.Duration) time.Duration {
	age = min(max(age, 0), outageHorizon)
	place := time.Duration(float64(outageSweep) * float64(outageHorizon-age) / float64(outageHorizon))
	return place + time.Duration(int64(outageTieBreak)/1000*int64(claimHash(id)%1001))
}

// outageBackoff is the round'th wait of claim id: 30 s doubling to 5 min,
// each ±10 % by the claim's ID, the same on every replay. Before
// versionOutageGrid it is every wait; from it, the first four.
func outageBackoff(id string, round int) time.Duration {
	wait := maxOutageWait
	if round < 4 {
		wait = min(firstOutageWait<<round, maxOutageWait)
	}
	spread := int64(claimHash(id)%201) - 100 // -100..100 thousandths: ±10 %
	return wait + time.Duration(int64(wait)/1000*spread)
}

// claimHash spreads claims by their ID, the same on every replay.
func claimHash(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

// dependencyDown reads the dependency a step found down and the attempt
// that handed the wait back.
func dependencyDown(err error) (string, int32, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrDependencyDown {
		return "", 0, false
	}
	var dep string
	var attempt int32
	if appErr.Details(&dep, &attempt) != nil || dep == "" {
		return "unknown", 1, true
	}
	return dep, attempt, true
}

// The bounds of a step's waits for model capacity: a day, or 200 waits
// (some 2,000 history events, well inside the server's limit), whichever
// comes first; then the claim stops with a cap (dead-lettered, redrivable
// when the provider has room again). Each wait is at least a second.
const (
	maxBudgetWaitPerStep = 24 * time.Hour
	maxBudgetRounds      = 200
	minBudgetWait        = time.Second
)

// budgetWait reads the wait a model step handed back, and the attempt
// that handed it back.
func budgetWait(err error) (time.Duration, int32, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrModelBudgetWait {
		return 0, 0, false
	}
	var wait time.Duration
	var attempt int32
	if appErr.Details(&wait, &attempt) != nil {
		attempt = 1
		if appErr.Details(&wait) != nil {
			wait = minBudgetWait
		}
	}
	return min(max(wait, minBudgetWait), maxBudgetWait), attempt, true
}

// maxBudgetWait bounds one durable wait for model capacity; the step then
// asks the budget again.
const maxBudgetWait = activities.MaxBudgetWait

func (r *claimRun) execOnce(ctx workflow.Context, p stepPlan, fn, in any, out interface{ Attempts() int32 }) error {
	if age := workflow.Now(ctx).Sub(r.started); age >= r.caps.MaxAge {
		return capErr(CapAge, "the run is %s old, its cap is %s", age.Round(time.Second), r.caps.MaxAge)
	}
	left := r.caps.MaxSteps - r.stepsExecuted
	if left <= 0 {
		return capErr(CapSteps, "%d activity executions, retries included", r.stepsExecuted)
	}
	local := p.runsLocal(r.pending)
	rp := p.retry(local)
	cut := rp.MaximumAttempts == 0 || int(rp.MaximumAttempts) > left
	if cut {
		rp.MaximumAttempts = int32(left)
	}
	var f workflow.Future
	if local {
		lo := *p.local
		lo.RetryPolicy = &rp
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), fn, in)
	} else {
		ro := *p.remote
		ro.RetryPolicy = &rp
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ro), fn, in)
	}
	err := f.Get(ctx, out)
	r.ran(p, local, out)
	if err != nil {
		if cut && attemptsRanOut(err, local) {
			r.stepsExecuted = r.caps.MaxSteps
			return capErr(CapSteps, "%d activity executions, retries included; the last: %v", r.caps.MaxSteps, err)
		}
		return err
	}
	r.stepsExecuted += int(out.Attempts())
	return nil
}

// attemptsRanOut says whether a step's error is its retry policy's
// attempts running out. The server says so of a regular activity (its
// retry state); a local activity's exhausted retries come back as its own
// error with no retry state, so there it is any error it would have
// retried: not one it refused for good, nor a timeout or a cancellation.
func attemptsRanOut(err error, local bool) bool {
	var actErr *temporal.ActivityError
	if !errors.As(err, &actErr) {
		return false
	}
	if actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
		return true
	}
	var appErr *temporal.ApplicationError
	return local && errors.As(err, &appErr) && !appErr.NonRetryable()
}

// callModel runs a model activity under the spend cap as well.
func (r *claimRun) callModel(ctx workflow.Context, p stepPlan, fn, in any, out interface{ Attempts() int32 }) error {
	if r.spendMicros >= r.caps.MaxModelSpendMicros {
		return capErr(CapModelSpend, "spent %d of %d micro-dollars", r.spendMicros, r.caps.MaxModelSpendMicros)
	}
	return r.exec(ctx, p, fn, in, out)
}

// used accounts for a model answer (use names it: model, prompt version,
// build, output hash): recorded for the audit, counted against the spend
// cap (checked before the next call).
func (r *claimRun) used(step claim.Step, turn int, use ModelUse, u activities.Usage) {
	use.Step, use.Turn, use.TokensIn, use.TokensOut = int(step), turn, u.TokensIn, u.TokensOut
	if !r.since.provenance { // runs before keep their records' bytes
		use.PromptVersion, use.BuildID = "", ""
	}
	cost := r.price.Cost(u.TokensIn, u.TokensOut)
	if r.since.agent { // runs before the loop recorded no per-call cost
		use.CostMicros = cost
	}
	r.models = append(r.models, use)
	r.tokensIn += u.TokensIn
	r.tokensOut += u.TokensOut
	r.spendMicros += cost
}
