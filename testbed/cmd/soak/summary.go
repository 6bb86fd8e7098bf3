package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// summary is the soak's result, printed and written as JSON.
type summary struct {
	RunID       string    `json:"run_id"`
	Seed        uint64    `json:"seed"`
	Dir         string    `json:"dir"`
	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	Options     options   `json:"options"`

	Claims struct {
		Total        int `json:"total"`
		Auto         int `json:"auto"`
		Approved     int `json:"approved"`
		Rejected     int `json:"rejected"`
		Expired      int `json:"expired"`
		DeadLettered int `json:"dead_lettered"`
		Other        int `json:"other"`
		NotFinished  int `json:"not_finished"`
	} `json:"claims"`
	Starts struct {
		Retries        int64 `json:"retries"`
		AlreadyStarted int64 `json:"already_started"`
	} `json:"starts"`
	Transfers struct {
		Count            int    `json:"count"`
		TotalMinor       int64  `json:"total_minor"`
		Total            string `json:"total"`
		PaymentsReplayed int    `json:"payments_replayed"` // results whose step 6 found the transfer already made
		KeyRequests      int    `json:"key_requests"`      // POSTs carrying an idempotency key, at stripesim
		KeyReplays       int    `json:"key_replays"`
		KeyInUse         int    `json:"key_in_use"`
	} `json:"transfers"`
	Emails int `json:"emails"`
	// Deliveries counts the messages moved into the mail spool (a message
	// sent again replaces its file: only the moves show it).
	Deliveries struct {
		Total  int `json:"total"`
		Resent int `json:"resent"`
	} `json:"spool_deliveries"`
	// Slowest is the claim that took longest from start to close.
	Slowest struct {
		Claim   string  `json:"claim"`
		Seconds float64 `json:"seconds"`
	} `json:"slowest_claim"`
	// Faults is the -faults soak's network faults.
	Faults *faultReport `json:"faults,omitempty"`
	Chaos  struct {
		Kills                 int             `json:"kills"`
		WorkerRestarts        int             `json:"worker_restarts"`
		WorkerExits           map[string]int  `json:"worker_exits"`
		ServerRestarts        int             `json:"server_restarts"`
		PostgresRestarts      int             `json:"postgres_restarts"`
		ServerDowntimeSeconds float64         `json:"server_downtime_seconds"`
		ServerStopForced      bool            `json:"server_stop_forced"`
		Restarts              []serverRestart `json:"server_restart_windows"`
	} `json:"chaos"`
	Resumes struct {
		ActivityResumes       int            `json:"activity_resumes"`
		ActivityResumesByType map[string]int `json:"activity_resumes_by_type"`
		WorkflowTaskTimeouts  int            `json:"workflow_task_timeouts"`
		// WorkflowTaskAttemptsLost includes the retried attempts history
		// does not record (see historyFacts.wtAttemptsLost).
		WorkflowTaskAttemptsLost int `json:"workflow_task_attempts_lost"`
		StickyQueueTimeouts      int `json:"sticky_queue_timeouts"`
		WorkflowTaskFailures     int `json:"workflow_task_failures"`
		LocalActivityRetries     int `json:"local_activity_retries"`
		ClaimsResumed            int `json:"claims_resumed"`
	} `json:"resumes"`
	ModelRepeats struct {
		Claims          int `json:"claims"`
		Triage          int `json:"triage"`
		Assess          int `json:"assess"`
		ByKill          int `json:"by_kill"`
		ByServerRestart int `json:"by_server_restart"`
		ByRetry         int `json:"by_local_retry"`
		ByReset         int `json:"by_rollback_reset"`
		ByFault         int `json:"by_network_fault"`
		Unexplained     int `json:"unexplained"`
	} `json:"model_repeats"`
	Decisions struct {
		Approve     int            `json:"approve"`
		Reject      int            `json:"reject"`
		Signals     int            `json:"signals"`
		CLIFailures int            `json:"cli_failures"`
		Resends     int            `json:"resends"`
		Accepted    int            `json:"accepted"` // attempts recorded in results
		Refused     int            `json:"refused"`
		RefusedWhy  map[string]int `json:"refused_why"`
	} `json:"decisions"`
	// Rollout is the -rollout soak's rehearsal (rollout.go).
	Rollout       *rolloutReport `json:"rollout,omitempty"`
	Discrepancies []discrepancy  `json:"discrepancies"`
	Passed        bool           `json:"passed"`

	// The raw record behind the counts, for digging into a failure: every
	// decision the approver sent and every kill (time and pid).
	DecisionLog []decision `json:"decision_log"`
	RefusedLog  []refusal  `json:"refused_log"`
	KillLog     []kill     `json:"kill_log"`
}

// refusal is a decision attempt a claim recorded and refused.
type refusal struct {
	Claim    string    `json:"claim"`
	At       time.Time `json:"at"`
	Name     string    `json:"name"`
	Approver string    `json:"approver"`
	Refusal  string    `json:"refusal"`
}

// faultReport is what the -faults soak did to the network.
type faultReport struct {
	Injected     int            `json:"injected"`
	Links        int            `json:"links"`
	ByKind       map[string]int `json:"by_kind"`
	ByDependency map[string]int `json:"by_dependency"`
	// Held says what each partitioned worker held as its partition began.
	Held []string      `json:"held"`
	Log  []faultWindow `json:"log"`
}

func newSummary() *summary {
	s := &summary{Discrepancies: []discrepancy{}}
	s.Resumes.ActivityResumesByType = map[string]int{}
	s.Decisions.RefusedWhy = map[string]int{}
	return s
}

// countDecisions totals what the approver did.
func (s *summary) countDecisions(book map[string]decision) {
	for _, d := range book {
		if d.Verdict == "approve" {
			s.Decisions.Approve++
		} else {
			s.Decisions.Reject++
		}
		s.Decisions.Signals += d.Sends
		s.Decisions.CLIFailures += d.CLIFailures
		s.Decisions.Resends += d.Resends
		s.DecisionLog = append(s.DecisionLog, d)
	}
	slices.SortFunc(s.DecisionLog, func(a, b decision) int { return strings.Compare(a.ClaimID, b.ClaimID) })
}

func (s *summary) print(w io.Writer) {
	c := s.Claims
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("soak %s (seed %d): %d claims in %s", s.RunID, s.Seed, c.Total, (time.Duration(s.WallSeconds * float64(time.Second))).Round(time.Second))
	p("  claims            %d auto-approved paid, %d approved paid, %d rejected; %d expired, %d dead-lettered, %d other, %d not finished",
		c.Auto, c.Approved, c.Rejected, c.Expired, c.DeadLettered, c.Other, c.NotFinished)
	p("  transfers         %d, total %s usd; %d payments found already made on retry; stripesim: %d keyed requests, %d replays, %d in-use",
		s.Transfers.Count, s.Transfers.Total, s.Transfers.PaymentsReplayed, s.Transfers.KeyRequests, s.Transfers.KeyReplays, s.Transfers.KeyInUse)
	p("  e-mails           %d claimant notices sent once each and found in the spool", s.Emails)
	p("  spool             %d messages moved in, %d of them a message already there; slowest claim %s, %.1f s start to close",
		s.Deliveries.Total, s.Deliveries.Resent, orDash(s.Slowest.Claim), s.Slowest.Seconds)
	if f := s.Faults; f != nil {
		p("  network faults    %d on %d links (%s); by dependency: %s", f.Injected, f.Links, formatCounts(f.ByKind), formatCounts(f.ByDependency))
		for _, h := range f.Held {
			p("                    %s", h)
		}
	}
	p("  kills             %d SIGKILLs; %d worker restarts (%s)", s.Chaos.Kills, s.Chaos.WorkerRestarts, formatCounts(s.Chaos.WorkerExits))
	p("  server restarts   %d Temporal, %d PostgreSQL crashes; down %.1f s in all (Temporal SIGKILL needed: %t)", s.Chaos.ServerRestarts,
		s.Chaos.PostgresRestarts, s.Chaos.ServerDowntimeSeconds, s.Chaos.ServerStopForced)
	p("  activity resumes  %d (attempt > 1: %s)", s.Resumes.ActivityResumes, formatCounts(s.Resumes.ActivityResumesByType))
	p("  workflow-task resumes %d timed out on a worker (%d attempts lost in all), %d moved off a dead worker's sticky queue, %d failed; %d local activity retries; %d claims resumed at least once",
		s.Resumes.WorkflowTaskTimeouts, s.Resumes.WorkflowTaskAttemptsLost, s.Resumes.StickyQueueTimeouts, s.Resumes.WorkflowTaskFailures,
		s.Resumes.LocalActivityRetries, s.Resumes.ClaimsResumed)
	p("  model repeats     %d claims had a model step asked again (triage %d, assess %d): %d where a kill landed in the step, %d across the server restart, %d after a failed local attempt, %d reset by a rollback, %d whose answer a network fault lost, %d unexplained",
		s.ModelRepeats.Claims, s.ModelRepeats.Triage, s.ModelRepeats.Assess, s.ModelRepeats.ByKill, s.ModelRepeats.ByServerRestart,
		s.ModelRepeats.ByRetry, s.ModelRepeats.ByReset, s.ModelRepeats.ByFault, s.ModelRepeats.Unexplained)
	p("  decisions         %d approve, %d reject via `temporal workflow signal`: %d signals sent, %d CLI failures retried, %d resends; claims recorded %d accepted, %d refused (%s)",
		s.Decisions.Approve, s.Decisions.Reject, s.Decisions.Signals, s.Decisions.CLIFailures, s.Decisions.Resends, s.Decisions.Accepted, s.Decisions.Refused,
		formatCounts(s.Decisions.RefusedWhy))
	p("  starts            %d retried, %d found already started", s.Starts.Retries, s.Starts.AlreadyStarted)
	if r := s.Rollout; r != nil {
		p("  rollout           replay-check: v2 exit %d, v3 exit %d; %d claims parked under v1, %d of them approved and paid by v2 on its new path; v1 drained %.0f s after v2 became current",
			r.ReplayV2.Exit, r.ReplayV3.Exit, r.ParkedUnderV1, r.ParkedV1PaidOnV2, r.V1DrainedSeconds)
		p("                    v3 deployed anyway: started %d runs (%d open at the rollback), could not replay %d runs of other builds; rolled back, %d runs reset",
			r.V3Started, r.V3StartedOpen, r.V3Unreplayable, len(r.Reset))
		for _, st := range r.Steps {
			p("    %s  %-24s %s", st.At.Format("15:04:05"), st.Step, st.Detail)
		}
	}
	p("  discrepancies     %d", len(s.Discrepancies))
	for _, d := range s.Discrepancies {
		p("    - %s [%s] %s", orDash(d.Claim), d.Check, d.Detail)
	}
	p("  wall time         %.1f s (working directory %s)", s.WallSeconds, s.Dir)
	if s.Passed {
		p("PASS")
	} else {
		p("FAIL")
	}
}

func (s *summary) writeJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
