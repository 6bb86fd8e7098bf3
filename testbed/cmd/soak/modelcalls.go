package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Causes of a repeated model call.
const (
	causeKill    = "kill"
	causeRestart = "server restart"
	causeRetry   = "local retry"
	causeFault   = "network fault"
)

// checkModelCalls: the usage ledger shows each model step asked once, or
// more often only where the soak interrupted that very step. Anything else
// means a resumed run asked the model again for an answer it already had.
func (v *verifier) checkModelCalls(f *claimFacts) {
	id := f.planned.Claim.ID
	triage, assess := string(claim.StepKey(id, claim.StepTriage)), string(claim.StepKey(id, claim.StepAssess))
	calls := map[string]int{}
	for _, c := range f.modelCalls {
		calls[string(c.Key)]++
	}
	var triageKeys []string
	for key, n := range calls {
		switch {
		case claim.IdempotencyKey(key).Within(claim.IdempotencyKey(triage)):
			triageKeys = append(triageKeys, key)
		case key != assess:
			v.fail(id, "model calls", "%d call(s) under unexpected key %s", n, key)
		}
	}
	slices.Sort(triageKeys)
	if len(triageKeys) == 0 {
		triageKeys = []string{triage} // reported missing below
	}
	if f.result == nil {
		return // unfinished: reported already
	}
	// Every soak claim is covered, so every finished one passed steps 2 and 4.
	repeated := false
	type modelStep struct {
		key     string
		explain func(*claimFacts, int) (string, string)
		count   *int
	}
	var steps []modelStep
	for _, key := range triageKeys { // each turn of the agent loop
		steps = append(steps, modelStep{key, v.explainTriage, &v.sum.ModelRepeats.Triage})
	}
	steps = append(steps, modelStep{assess, v.explainAssess, &v.sum.ModelRepeats.Assess})
	for _, step := range steps {
		n := calls[step.key]
		if n == 0 {
			v.fail(id, "model calls", "no call under %s in the ledger", step.key)
			continue
		}
		if n == 1 {
			continue
		}
		repeated = true
		*step.count++
		if v.chaos.wasReset(id) {
			// A rollback reset the run to before the bad build's first
			// task: the answers recorded after that point went with it.
			v.sum.ModelRepeats.ByReset++
			continue
		}
		switch cause, why := step.explain(f, n); cause {
		case causeKill:
			v.sum.ModelRepeats.ByKill++
		case causeRestart:
			v.sum.ModelRepeats.ByServerRestart++
		case causeRetry:
			v.sum.ModelRepeats.ByRetry++
		case causeFault:
			v.sum.ModelRepeats.ByFault++
		default:
			v.sum.ModelRepeats.Unexplained++
			v.fail(id, "model calls", "%s asked %d times: %s", step.key, n, why)
		}
	}
	if repeated {
		v.sum.ModelRepeats.Claims++
	}
}

// explainTriage: a triage turn is a local activity (every turn of the
// rules model's, in the run's first workflow task), so it runs again only
// when a local attempt failed after the model answered, or its task was
// lost before its marker was recorded; a costly model's turn that follows
// a pending one is a regular activity, retried by the server
// (explainRegularTurn).
func (v *verifier) explainTriage(f *claimFacts, n int) (string, string) {
	if cause := v.explainRegularTurn(f, n); cause != "" && n-1 > f.hist.triage.retries {
		return cause, ""
	}
	return v.explainLocal(f.hist.triage, n)
}

// explainLocal explains n asks of a local model step from the span of
// tasks that ran it: each repeat is a local attempt that failed after the
// model answered (a ledger write in a PostgreSQL crash, say) or a workflow
// task attempt lost before the marker was recorded. A loss is explained by
// a kill when a worker holding a lost attempt was SIGKILLed before that
// attempt ended, or when any worker was killed while the attempts history
// leaves out were running.
func (v *verifier) explainLocal(t localSpan, n int) (string, string) {
	if n-1 <= t.retries {
		return causeRetry, ""
	}
	if n-1 > t.lost+t.retries {
		return "", fmt.Sprintf("only %d workflow task attempt(s) were lost and %d local attempt(s) retried before its answer was recorded", t.lost, t.retries)
	}
	var held []string
	for _, lost := range t.interrupts {
		if v.chaos.killedPID(pidOf(lost.identity), lost.endedAt) {
			return causeKill, ""
		}
		held = append(held, fmt.Sprintf("%s %s–%s", lost.identity, lost.startedAt.Format("15:04:05.000"), lost.endedAt.Format("15:04:05.000")))
	}
	for _, lost := range t.interrupts {
		// The worker holding the lost attempt had a link faulted then:
		// the task's completion, or the local step's answer, was lost.
		if w := v.workerOf(pidOf(lost.identity)); w != "" && v.chaos.faultIn(w, lost.startedAt, lost.endedAt) {
			return causeFault, ""
		}
	}
	switch {
	case t.lost > len(t.interrupts) && v.chaos.killIn(t.firstStartedAt, t.recordedStartedAt):
		return causeKill, ""
	case v.chaos.restartOverlaps(t.firstStartedAt, t.recordedStartedAt):
		return causeRestart, ""
	case t.lost > len(t.interrupts) && v.chaos.faultIn("", t.firstStartedAt, t.recordedStartedAt):
		return causeFault, ""
	}
	return "", fmt.Sprintf("%d attempt(s) lost before the answer was recorded, with no worker killed and the server up (recorded: %s)",
		t.lost, strings.Join(held, "; "))
}

// explainRegularTurn: a triage turn run as a regular activity (a costly
// model's turn after the first) is retried by the server like assess, each
// attempt asking at most once. The ledger's key names the turn, the history
// does not (its input is encrypted), so some regular turn with that many
// attempts must have been interrupted by the chaos.
func (v *verifier) explainRegularTurn(f *claimFacts, n int) string {
	for _, a := range f.hist.turns {
		if a.attempt < int32(n) {
			continue
		}
		switch {
		case v.chaos.killIn(a.scheduledAt, a.lastStartedAt):
			return causeKill
		case v.chaos.restartOverlaps(a.scheduledAt, a.lastStartedAt):
			return causeRestart
		case v.chaos.faultIn("", a.scheduledAt, a.lastStartedAt):
			return causeFault
		}
	}
	return ""
}

// explainAssess: assess is a regular activity, retried by the server; each
// attempt asks at most once. It is explained by a kill when a worker was
// SIGKILLed between its scheduling and its last attempt's start (the
// history does not say which worker ran the earlier attempts). The rules
// model's assessment runs local, in the task that ran triage, from
// versionFreeAssess on: explained as triage's is.
func (v *verifier) explainAssess(f *claimFacts, n int) (string, string) {
	a := f.hist.assess
	switch {
	case a == nil && f.hist.assessLocal.recorded:
		return v.explainLocal(f.hist.assessLocal, n)
	case a == nil:
		return "", "the history has neither an assessment activity nor its marker"
	case int32(n) > a.attempt:
		return "", fmt.Sprintf("more calls than the activity's %d attempt(s)", a.attempt)
	case v.chaos.killIn(a.scheduledAt, a.lastStartedAt):
		return causeKill, ""
	case v.chaos.restartOverlaps(a.scheduledAt, a.lastStartedAt):
		return causeRestart, ""
	case v.chaos.faultIn("", a.scheduledAt, a.lastStartedAt):
		// An earlier attempt's answer, or its completion, was lost on a
		// faulted link (the history does not say which worker ran it).
		return causeFault, ""
	}
	return "", fmt.Sprintf("attempt %d with no kill or server restart since it was scheduled; last failure: %s", a.attempt, a.lastFailure)
}
