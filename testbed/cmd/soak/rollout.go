package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/rollout"
	"github.com/durableclaims/durableclaims/workflows"
)

// The -rollout soak rehearses a deploy on the real Temporal server, under
// SIGKILLs, with the commands an operator runs (docs/operations.md,
// "Rehearsing a rollout"):
//
//  1. v1 workers make themselves current; the first half of the claims
//     start, and those above the limit park (the approver holds back).
//  2. v2 (a change behind GetVersion, testbed/rollout) comes up beside v1,
//     taking nothing; `worker replay-check` of v2 passes against the live
//     runs, v3's (the same change plus one without GetVersion) is refused.
//  3. v2 ramps to 10 % while claims start, then becomes current; only
//     then are the claims parked under v1 decided: v2 pays them, on its
//     new path.
//  4. v1 drains (describe-version) and is stopped.
//  5. v3 is deployed anyway, ramping, while the last claims start and the
//     claims parked under v2 are decided: it fails the tasks of runs it
//     cannot replay and starts runs of its own. It is rolled back (its
//     ramp removed), `claimsctl reset-build` resets the open runs it
//     worked on, and v3 is stopped.
//  6. Every claim ends, and is checked as every soak checks it.

// Build IDs of the rehearsal's three builds.
const (
	buildV1 = "rollout-v1"
	buildV2 = "rollout-v2"
	buildV3 = "rollout-v3"
)

// rolloutReport is what the rehearsal did and saw, in the summary.
type rolloutReport struct {
	Steps []rolloutStep `json:"steps"`
	// ReplayV2 and ReplayV3 are `worker replay-check`'s exit code and the
	// head of its report, for each new build against the live runs.
	ReplayV2 replayRun `json:"replay_check_v2"`
	ReplayV3 replayRun `json:"replay_check_v3"`
	// V1DrainedSeconds is from v2 becoming current to v1 reported drained.
	V1DrainedSeconds float64 `json:"v1_drained_after_s"`
	// ParkedUnderV1 counts the claims that parked before v2 came up;
	// ParkedV1PaidOnV2 those of them approved and paid by v2 on its new
	// path (the GetVersion marker and the cooling-off timer in history).
	ParkedUnderV1    int `json:"parked_under_v1"`
	ParkedV1PaidOnV2 int `json:"parked_under_v1_paid_on_v2"`
	// V3Started counts runs whose first workflow task v3 completed, and
	// V3StartedOpen those of them still open (parked) when v3 was rolled
	// back; V3Unreplayable the runs of other builds v3 could not replay (a
	// workflow task it failed, or a status query it refused, as
	// nondeterministic).
	V3Started      int `json:"v3_started"`
	V3StartedOpen  int `json:"v3_started_open"`
	V3Unreplayable int `json:"v3_unreplayable_runs"`
	// DecidedFromQueue counts the claims the approver decided from the
	// approval queue's request, their status query having answered without
	// it (v3 answering for runs it cannot replay, approver.request).
	DecidedFromQueue int `json:"decided_from_queue"`
	// Reset lists the claims claimsctl reset-build reset after the
	// rollback.
	Reset []string `json:"reset_after_rollback"`
}

type rolloutStep struct {
	At     time.Time `json:"at"`
	Step   string    `json:"step"`
	Detail string    `json:"detail,omitempty"`
}

type replayRun struct {
	Exit   int    `json:"exit"`
	Report string `json:"report"`
}

func (s *soak) step(name, detail string, args ...any) {
	d := fmt.Sprintf(detail, args...)
	s.mu.Lock()
	s.rollout.Steps = append(s.rollout.Steps, rolloutStep{At: time.Now().UTC(), Step: name, Detail: d})
	s.mu.Unlock()
	s.log.Info("rollout: "+name, "detail", d)
}

// group is the workers of one build, with their own killer.
type group struct {
	build   string
	workers []*supervisor
	stopK   context.CancelFunc
	killed  sync.WaitGroup
}

// startGroup starts the soak's worker count of bin as build, each under a
// supervisor, and a killer that SIGKILLs one of them every 1–3 s.
func (s *soak) startGroup(ctx context.Context, build, bin string, extra ...string) *group {
	g := &group{build: build}
	env := append(s.workerEnv(), append([]string{"WORKER_BUILD_ID=" + build}, extra...)...)
	for i := 1; i <= s.o.Workers; i++ {
		w := newSupervisor(fmt.Sprintf("worker-%s-%d", build, i), bin, s.dir, env, s.log)
		g.workers = append(g.workers, w)
		s.mu.Lock()
		s.workers = append(s.workers, w)
		s.mu.Unlock()
		go w.run()
	}
	kctx, stop := context.WithCancel(ctx)
	g.stopK = stop
	g.killed.Go(func() { killer(kctx, g.workers, s.o.KillMin, s.o.KillMax, &s.chaos, s.log) })
	return g
}

// stop stops the group's killer, then drains its workers (SIGTERM).
func (g *group) stop() {
	g.stopK()
	g.killed.Wait()
	var wg sync.WaitGroup
	for _, w := range g.workers {
		wg.Go(func() { w.stop(25 * time.Second) })
	}
	wg.Wait()
}

// rolloutPhase runs the rehearsal and returns once every claim is
// terminal (or the timeout passed: notFinished lists the rest).
func (s *soak) rolloutPhase(ctx context.Context, begin time.Time, plan []plannedClaim) (*approver, *starter, []string, error) {
	runCtx, cancel := context.WithDeadline(ctx, begin.Add(s.o.Timeout))
	defer cancel()

	root, err := moduleRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	bins := map[string]string{}
	for _, v := range []string{"v2", "v3"} {
		if bins[v], err = rollout.Build(runCtx, root, filepath.Join(s.dir, "bin-"+v), v); err != nil {
			return nil, nil, nil, err
		}
	}
	s.step("built", "v2 %s, v3 %s (go build -tags rehearsal -overlay)", bins["v2"], bins["v3"])

	v1 := s.startGroup(runCtx, buildV1, s.o.WorkerBin)
	defer v1.stop()
	if err := s.awaitRouting(runCtx, buildV1, ""); err != nil {
		return nil, nil, nil, fmt.Errorf("v1 never became current: %w", err)
	}
	s.step("v1 current", "the first build made current (by the cluster, standing in for the operator's first deploy)")

	cliAuth, _ := s.server.auth(temporalauth.RoleClaimsctl)
	appr := newApprover(s.client, s.o.Temporal, s.server.hostPort(), cliAuth, s.prefix(), plan, s.o.DecideWithin, s.key, s.store, s.log.With("component", "approver"))
	n := len(plan)
	w1, w2, w3 := plan[:n/2], plan[n/2:3*n/4], plan[3*n/4:]
	v2Current, v3Ramping, rolledBack := make(chan struct{}), make(chan struct{}), make(chan struct{})
	gates := map[string]chan struct{}{}
	for _, p := range w1 {
		gates[p.Claim.ID] = v2Current
	}
	for _, p := range w2 {
		gates[p.Claim.ID] = v3Ramping
	}
	for _, p := range w3 {
		gates[p.Claim.ID] = rolledBack
	}
	appr.gate = func(id string) <-chan struct{} {
		if g, ok := gates[id]; ok {
			return g
		}
		return nil
	}
	apprCtx, stopApprover := context.WithCancel(runCtx)
	var approverDone sync.WaitGroup
	approverDone.Go(func() { appr.watch(apprCtx) })
	defer func() { stopApprover(); approverDone.Wait() }()
	st := &starter{client: s.starts, store: s.store, docs: s.docs, rate: s.o.Rate}
	progressCtx, stopProgress := context.WithCancel(runCtx)
	defer stopProgress()
	go s.progress(progressCtx, st, appr, len(plan))

	if err := st.run(runCtx, w1); err != nil {
		return nil, nil, nil, fmt.Errorf("starting the first claims: %w", err)
	}
	parked := 0
	for _, p := range w1 {
		if p.NeedsApproval {
			parked++
		}
	}
	if err := s.awaitSettled(runCtx, w1, parked); err != nil {
		return nil, nil, nil, err
	}
	s.rollout.ParkedUnderV1 = parked
	s.step("v1 settled", "%d claims started under v1, %d of them parked at step 5", len(w1), parked)

	v2 := s.startGroup(runCtx, buildV2, bins["v2"], "WORKER_PROMOTE=never")
	defer v2.stop()
	if err := s.awaitRegistered(runCtx, buildV2); err != nil {
		return nil, nil, nil, err
	}
	if err := s.awaitRouting(runCtx, buildV1, ""); err != nil {
		return nil, nil, nil, fmt.Errorf("v2 came up and the routing changed: %w", err)
	}
	s.step("v2 up", "beside v1, taking nothing (WORKER_PROMOTE=never)")

	s.rollout.ReplayV2 = s.replayCheck(runCtx, bins["v2"])
	s.step("replay-check v2", "exit %d: %s", s.rollout.ReplayV2.Exit, firstLine(s.rollout.ReplayV2.Report))
	if s.rollout.ReplayV2.Exit != 0 {
		return nil, nil, nil, fmt.Errorf("worker replay-check refused v2 (exit %d): %s", s.rollout.ReplayV2.Exit, s.rollout.ReplayV2.Report)
	}
	s.rollout.ReplayV3 = s.replayCheck(runCtx, bins["v3"])
	s.step("replay-check v3", "exit %d: %s; %s", s.rollout.ReplayV3.Exit, firstLine(s.rollout.ReplayV3.Report), cut(wouldBreak(s.rollout.ReplayV3.Report), 240))
	if s.rollout.ReplayV3.Exit != 3 {
		return nil, nil, nil, fmt.Errorf("worker replay-check passed v3 (exit %d), which changes the command sequence without GetVersion: %s", s.rollout.ReplayV3.Exit, s.rollout.ReplayV3.Report)
	}

	if err := s.deployment(runCtx, "set-ramping-version", "--build-id", buildV2, "--percentage", "10"); err != nil {
		return nil, nil, nil, err
	}
	s.step("v2 ramping 10%", "")
	if err := st.run(runCtx, w2[:len(w2)/2]); err != nil {
		return nil, nil, nil, err
	}
	if err := s.deployment(runCtx, "set-current-version", "--build-id", buildV2); err != nil {
		return nil, nil, nil, err
	}
	currentAt := time.Now()
	s.step("v2 current", "the claims parked under v1 are decided from now on")
	close(v2Current)
	if err := st.run(runCtx, w2[len(w2)/2:]); err != nil {
		return nil, nil, nil, err
	}
	if err := s.awaitDrained(runCtx, buildV1); err != nil {
		return nil, nil, nil, err
	}
	s.rollout.V1DrainedSeconds = time.Since(currentAt).Seconds()
	v1.stop()
	s.step("v1 drained and stopped", "%.0f s after v2 became current", s.rollout.V1DrainedSeconds)

	v3 := s.startGroup(runCtx, buildV3, bins["v3"], "WORKER_PROMOTE=never")
	defer v3.stop()
	if err := s.awaitRegistered(runCtx, buildV3); err != nil {
		return nil, nil, nil, err
	}
	// Half the claims' tasks by default (-v3-ramp): enough that a
	// rehearsal of 200 claims sees v3 both fail the runs of other builds
	// and start runs of its own; CI's short run ramps it to 100 % so that
	// it surely does (a real canary would take 5-10 %).
	ramp := strconv.FormatFloat(s.o.V3Ramp, 'f', -1, 64)
	if err := s.deployment(runCtx, "set-ramping-version", "--build-id", buildV3, "--percentage", ramp); err != nil {
		return nil, nil, nil, err
	}
	close(v3Ramping)
	s.step("v3 ramping "+ramp+"%", "deployed although the replay check refused it; the claims parked under v2 are decided from now on")
	started := make(chan error, 1)
	var allStarted atomic.Bool
	go func() { err := st.run(runCtx, w3); allStarted.Store(true); started <- err }()
	// The claims v3 starts are decided only after the rollback: a parked
	// one is what the rollback must reset.
	seen := s.awaitV3Damage(runCtx, plan, allStarted.Load, 2*time.Minute)
	if err := <-started; err != nil {
		return nil, nil, nil, err
	}
	s.step("v3 damage", "%s", seen)

	if err := s.deployment(runCtx, "set-ramping-version", "--build-id", buildV3, "--delete"); err != nil {
		return nil, nil, nil, err
	}
	if err := s.awaitRouting(runCtx, buildV2, ""); err != nil {
		return nil, nil, nil, fmt.Errorf("v3's ramp removed, yet: %w", err)
	}
	s.step("v3 rolled back", "its ramp removed: v2 takes every claim again")
	// Stop v3 before resetting what it touched: a v3 worker still running
	// a task could complete it after the reset point was chosen. (A run
	// reset while v3 held its task once kept a workflow task no worker
	// completed, docs/operations.md.)
	v3.stop()
	s.step("v3 stopped", "")
	reset, err := s.resetBuild(runCtx, buildV3)
	if err != nil {
		return nil, nil, nil, err
	}
	s.rollout.Reset = reset
	s.step("reset-build v3", "%d open runs v3 worked on reset to before its first task; the last claims are decided from now on", len(reset))
	close(rolledBack)

	ids := make([]string, len(plan))
	for i, p := range plan {
		ids[i] = p.Claim.ID
	}
	done := make(chan error)
	close(done)
	noRestart := make(chan error, 1)
	noRestart <- nil
	notFinished, err := s.waitTerminal(runCtx, ids, done, noRestart)
	s.step("finished", "%d claims not finished", len(notFinished))
	return appr, st, notFinished, err
}

// workerEnv is what every worker of this soak gets.
func (s *soak) workerEnv() []string {
	auth, _ := s.server.auth(temporalauth.RoleWorker)
	return childEnv(append([]string{
		"TEMPORAL_ADDRESS=" + s.server.hostPort(), "TEMPORAL_NAMESPACE=default",
		"STRIPE_API_BASE=" + s.simURL, "STRIPE_SECRET_KEY=sk_test_local",
		"CLAIMS_DB=" + s.claimsDB, "MAIL_SPOOL=" + filepath.Join(s.dir, "mail"),
		"LOG_LEVEL=" + s.o.WorkerLogLevel, "BLOB_URL=" + s.blobURL,
		"APPROVERS_FILE=" + s.approversFile(),
		// The soaks kill processes under claims that expire unanswered:
		// no jurisdiction's rules (docs/law.md).
		"JURISDICTION_RULES_FILE=none", "FINAL_OUTCOME=reject",
	}, auth...)...)
}

// deployment runs `temporal worker deployment VERB --deployment-name …`
// with the real CLI, as the runbook does, retrying through a kill's
// moment (a version whose pollers all just died is refused briefly).
func (s *soak) deployment(ctx context.Context, verb string, args ...string) error {
	args = append([]string{"worker", "deployment", verb, "--deployment-name", config.DefaultDeploymentName, "--yes",
		"--address", s.server.hostPort(), "--namespace", "default"}, args...)
	auth, _ := s.server.auth(temporalauth.RoleOperator) // routing is the operator's alone
	var last string
	for range 20 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(cctx, s.o.Temporal, args...)
		cmd.Env = childEnv(auth...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
		last = fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
		s.log.Warn("temporal worker deployment "+verb+" failed; retrying", "error", last)
		if !sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("temporal worker deployment %s: %s", verb, last)
}

// replayCheck runs `worker replay-check` of bin against this run's claims.
func (s *soak) replayCheck(ctx context.Context, bin string) replayRun {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "replay-check", "--quiet", "--closed", "10000",
		"--query", fmt.Sprintf("WorkflowId STARTS_WITH %q", s.prefix()))
	cmd.Env = s.workerEnv()
	out, err := cmd.CombinedOutput()
	r := replayRun{Report: cut(string(out), 2000)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.Exit = exit.ExitCode()
	case err != nil:
		r.Exit, r.Report = -1, err.Error()
	}
	return r
}

// resetBuild runs `claimsctl reset-build BUILD` for this run's claims.
func (s *soak) resetBuild(ctx context.Context, build string) ([]string, error) {
	auth, _ := s.server.auth(temporalauth.RoleOperator) // a reset is the operator's alone
	// --include-paid: the rules model answers alike when asked again, so
	// a run reset past its payment asks the provider for the same transfer
	// under the same key, which the verifier holds to one per claim.
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(s.o.WorkerBin), "claimsctl"), "reset-build", build, "--include-paid",
		"--query", fmt.Sprintf("WorkflowId STARTS_WITH %q", s.prefix()))
	cmd.Env = childEnv(append([]string{"TEMPORAL_ADDRESS=" + s.server.hostPort(), "TEMPORAL_NAMESPACE=default"}, auth...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("claimsctl reset-build %s: %v: %s", build, err, out)
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if id, _, ok := strings.Cut(line, ": run "); ok {
			ids = append(ids, id)
			s.chaos.addReset(id)
		}
	}
	s.log.Info("claimsctl reset-build", "output", strings.TrimSpace(string(out)))
	return ids, nil
}

func (s *soak) describeDeployment(ctx context.Context) (client.WorkerDeploymentDescribeResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.client.WorkerDeploymentClient().GetHandle(config.DefaultDeploymentName).Describe(cctx, client.WorkerDeploymentDescribeOptions{})
}

// awaitRouting waits until the deployment's current build is current and
// its ramping build ramping ("" for none, or one at 0 %).
func (s *soak) awaitRouting(ctx context.Context, current, ramping string) error {
	var got string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		d, err := s.describeDeployment(ctx)
		if err == nil {
			rc := d.Info.RoutingConfig
			cur, ramp := "", ""
			if rc.CurrentVersion != nil {
				cur = rc.CurrentVersion.BuildID
			}
			if rc.RampingVersion != nil && rc.RampingVersionPercentage > 0 {
				// `set-ramping-version --delete` (CLI 1.5.1) leaves the
				// build ramping at 0 %: no claim goes to it.
				ramp = rc.RampingVersion.BuildID
			}
			if cur == current && ramp == ramping {
				return nil
			}
			got = fmt.Sprintf("current %q, ramping %q", cur, ramp)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("want current %q and ramping %q, the deployment has %s", current, ramping, got)
}

// awaitRegistered waits until a build's workers have polled and the
// deployment knows the version.
func (s *soak) awaitRegistered(ctx context.Context, build string) error {
	h := s.client.WorkerDeploymentClient().GetHandle(config.DefaultDeploymentName)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := h.DescribeVersion(cctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: build})
		cancel()
		// Both of the claims queue's task types: routing refuses a version
		// that would leave one of them unversioned.
		if err == nil && len(d.Info.TaskQueuesInfos) >= 2 {
			return nil
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("build %s never registered with the deployment", build)
}

// awaitDrained waits until the server reports build drained: no open run
// pinned to it (its drainage status refreshes every few seconds on the
// soak's cluster; three minutes by default).
func (s *soak) awaitDrained(ctx context.Context, build string) error {
	h := s.client.WorkerDeploymentClient().GetHandle(config.DefaultDeploymentName)
	status := "unknown"
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := h.DescribeVersion(cctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: build})
		cancel()
		if err == nil && d.Info.DrainageInfo != nil {
			if d.Info.DrainageInfo.DrainageStatus == client.WorkerDeploymentVersionDrainageStatusDrained {
				return nil
			}
			status = fmt.Sprint(d.Info.DrainageInfo.DrainageStatus)
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("build %s never drained (drainage status %s)", build, status)
}

// awaitSettled waits until every claim of wave is closed, but the parked
// ones, which wait at step 5.
func (s *soak) awaitSettled(ctx context.Context, wave []plannedClaim, parked int) error {
	ids := map[string]bool{}
	for _, p := range wave {
		ids[p.Claim.ID] = true
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		waiting, running := 0, 0
		for id := range ids {
			d, err := s.client.DescribeWorkflow(ctx, id, "")
			if err != nil {
				running++
				continue
			}
			info := d.RawResponse.GetWorkflowExecutionInfo()
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue
			}
			running++
			var status string
			if f := info.GetSearchAttributes().GetIndexedFields()["ClaimStatus"]; f != nil {
				status = strings.Trim(string(f.GetData()), `"`)
			}
			if status == workflows.StatusWaiting {
				waiting++
			}
		}
		if waiting == parked && running == parked {
			return nil
		}
		if !sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("the first claims did not settle: want %d parked and the rest closed", parked)
}

// awaitV3Damage watches v3 at work until it has failed a run of another
// build and started one of its own that is still open (parked), or for at
// most limit; it says what it saw.
func (s *soak) awaitV3Damage(ctx context.Context, plan []plannedClaim, allStarted func() bool, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		w := s.v3Work(ctx, plan)
		s.mu.Lock()
		s.rollout.V3Started, s.rollout.V3StartedOpen, s.rollout.V3Unreplayable = w.started, w.startedOpen, w.unreplayable
		s.mu.Unlock()
		if (allStarted() && w.startedOpen > 0 && w.unreplayable > 0) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Sprintf("v3 started %d runs (%d still open) and could not replay %d runs of other builds", w.started, w.startedOpen, w.unreplayable)
		}
		sleep(ctx, 3*time.Second)
	}
}

type v3Work struct{ started, startedOpen, unreplayable int }

// v3Work reads every claim: runs whose first workflow task v3 completed,
// and runs of other builds it could not replay, seen in history (a
// workflow task failed as nondeterministic) or by asking the claim its
// status (a query v3 answers replays the run: it fails the same way).
func (s *soak) v3Work(ctx context.Context, plan []plannedClaim) v3Work {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out v3Work
	sem := make(chan struct{}, 8)
	for _, p := range plan {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			first, failed, open := "", false, true
			it := s.client.GetWorkflowHistory(ctx, p.Claim.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return
				}
				if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil && first == "" {
					first = a.GetDeploymentVersion().GetBuildId()
				}
				if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil &&
					a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR {
					failed = true
				}
				switch e.GetEventType() {
				case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
					enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
					open = false
				}
			}
			if open && first != buildV3 && !failed {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := s.client.QueryWorkflow(qctx, p.Claim.ID, "", workflows.QueryStatus)
				cancel()
				failed = err != nil && strings.Contains(err.Error(), "TMPRL1100")
			}
			mu.Lock()
			defer mu.Unlock()
			if first == buildV3 {
				out.started++
				if open {
					out.startedOpen++
				}
			} else if failed {
				out.unreplayable++
			}
		}()
	}
	wg.Wait()
	return out
}

// checkRollout reads what the rehearsal promised from the histories: every
// claim parked under v1 and approved was paid by v2 on its new path.
func (s *soak) checkRollout(ctx context.Context, plan []plannedClaim, book map[string]decision, sum *summary) {
	// A rehearsal in which v3 did nothing proves nothing about the
	// rollback: say so rather than pass.
	s.mu.Lock()
	r := s.rollout
	s.mu.Unlock()
	vacuous := func(what string) {
		sum.Discrepancies = append(sum.Discrepancies, discrepancy{Check: "rollout", Detail: what + ": the rollback was not exercised (more claims, or a larger -v3-ramp)"})
	}
	switch {
	case r.V3Unreplayable == 0:
		vacuous("v3 failed no run of another build")
	case r.V3StartedOpen == 0:
		vacuous("v3 started no run still open at the rollback")
	case len(r.Reset) == 0:
		vacuous("claimsctl reset-build reset no run")
	}
	for _, d := range book {
		if d.FromQueue {
			s.rollout.DecidedFromQueue++
		}
	}
	n := len(plan)
	for _, p := range plan[:n/2] {
		d, ok := book[p.Claim.ID]
		if !p.NeedsApproval || !ok || d.Verdict != "approve" {
			continue
		}
		marker, payBuild, lastTaskBuild := false, "", ""
		it := s.client.GetWorkflowHistory(ctx, p.Claim.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				sum.Discrepancies = append(sum.Discrepancies, discrepancy{Claim: p.Claim.ID, Check: "rollout", Detail: err.Error()})
				break
			}
			if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil {
				lastTaskBuild = a.GetDeploymentVersion().GetBuildId()
			}
			if a := e.GetMarkerRecordedEventAttributes(); a != nil {
				for _, p := range a.GetDetails() {
					for _, pl := range p.GetPayloads() {
						var change string // the marker's change ID; its version does not decode as one
						marker = marker || s.dc.FromPayload(pl, &change) == nil && change == "rehearsal-cooling-off"
					}
				}
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "PayClaimant" {
				// Scheduled by the task whose completion came just before.
				payBuild = lastTaskBuild
			}
		}
		if marker && payBuild == buildV2 {
			s.rollout.ParkedV1PaidOnV2++
			continue
		}
		sum.Discrepancies = append(sum.Discrepancies, discrepancy{Claim: p.Claim.ID, Check: "rollout",
			Detail: fmt.Sprintf("parked under v1 and approved after v2 became current, yet paid by %q (cooling-off marker: %v)", payBuild, marker)})
	}
}

// moduleRoot is the repository's root, by go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", errors.New("-rollout and -faults need the source tree (builds, bin/): run the soak from the repository")
	}
	return filepath.Dir(gomod), nil
}

// wouldBreak is the first run a replay check names, or "".
func wouldBreak(report string) string {
	for _, line := range strings.Split(report, "\n") {
		if strings.HasPrefix(line, "WOULD BREAK:") {
			return line
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
