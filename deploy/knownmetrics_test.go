package deploy

// The series names the PromQL checks know. durableclaims' own are derived
// from the name constants of internal/metrics (ourMetrics), so a renamed
// metric breaks the alerts and panels that read the old name; the few
// series that are not ours (the Temporal SDK's, the Go runtime's, and
// Prometheus' `up`) are listed by hand below, each saying where it comes
// from.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/worker/metricsprom"
)

// metricKind is how a metric of internal/metrics is recorded, which decides
// the names the worker's OpenTelemetry Prometheus exporter gives its series.
type metricKind int

const (
	// counter: metrics.Count, Activity, ActivityAdd or the SDK handler's
	// Counter. Exported as <name>_total.
	counter metricKind = iota
	// gauge: the SDK handler's Gauge. Exported as <name>.
	gauge
	// timer: the SDK handler's Timer, a histogram in seconds. Exported as
	// <name>_seconds_bucket (with le), _count and _sum.
	timer
	// histogram: metrics.Observe, a histogram of values in unit. Exported as
	// <name>_<unit>_bucket (with le), _count and _sum, where the exporter
	// adds no unit that the name already ends in and none for a unit in
	// braces such as {event}.
	histogram
)

// ourMetric is one metric of internal/metrics: its name constant, how it is
// recorded, the Prometheus unit of a histogram ("" for none), and the labels
// it carries besides the SDK handler's tags, with their allowed values (nil:
// any value).
type ourMetric struct {
	name   string
	kind   metricKind
	unit   string
	labels map[string][]string
}

// Label values shared by several metrics.
var (
	claimSteps = []string{"intake", "triage", "coverage", "assess", "approval", "pay", "notify", "close", "audit"}
	// The tool label of the idempotency metrics takes the Tool* constants.
	idempotencyTools = []string{metrics.ToolStripe, metrics.ToolEmail, metrics.ToolLedger}
)

// ourMetrics lists every metric name constant of internal/metrics
// (TestKnownMetricsFollowInternalMetrics fails when one is missing).
var ourMetrics = []ourMetric{
	{metrics.IdempotencyReplays, counter, "", map[string][]string{"tool": idempotencyTools, "by": {"lookup", "provider", "receiver"}}},
	{metrics.IdempotencyConflicts, counter, "", map[string][]string{"tool": idempotencyTools}},
	{metrics.ClaimResumes, counter, "", map[string][]string{"kind": {"activity", "replay"}}},
	{metrics.ClaimsCompleted, counter, "", map[string][]string{"status": {"paid", "rejected", "withdrawn", "expired", "dead-lettered"}}},
	{metrics.ApprovalsWaiting, gauge, "", map[string][]string{"stage": {"waiting", "escalated"}}},
	{metrics.ApprovalsEscalated, counter, "", nil},
	{metrics.ApprovalsExpired, counter, "", nil},
	{metrics.ApprovalsOverdue, counter, "", nil},
	{metrics.StatutoryBreaches, counter, "", map[string][]string{"clock": {"acknowledge", "decide", "pay", "status"}, "jurisdiction": nil}},
	{metrics.DependencyWaits, counter, "", map[string][]string{"dependency": {"model", "stripe"}}},
	{metrics.DependencyCallsRefused, counter, "", map[string][]string{"dependency": {"stripe"}, "reason": {"circuit_open"}}},
	{metrics.ClaimStepDuration, timer, "seconds", map[string][]string{"step": claimSteps, "outcome": nil}},
	// Unit By: the name already ends in _bytes, so no second one is added
	// (claim_history_bytes_bytes_bucket would be unknown here).
	{metrics.ClaimHistoryBytes, histogram, "bytes", map[string][]string{"step": claimSteps}},
	// Unit {event}: a unit in braces is a count, the exporter adds nothing.
	{metrics.ClaimHistoryEvents, histogram, "", map[string][]string{"step": claimSteps}},
	{metrics.HistoryBudgetCrossed, counter, "", map[string][]string{"step": claimSteps}},
	{metrics.ReconciliationDiscrepancies, counter, "", map[string][]string{"category": {"missing", "orphaned", "duplicate", "amount_mismatch"}}},
	{metrics.ReconciliationLastRunUnmatched, gauge, "", nil},
	{metrics.ModelCalls, counter, "", map[string][]string{"provider": nil, "step": {"triage", "assess"}}},
	{metrics.ModelTokens, counter, "", map[string][]string{"provider": nil, "direction": {"in", "out"}}},
	{metrics.ModelCostMicros, counter, "", map[string][]string{"provider": nil}},
	{metrics.ModelWaits, counter, "", map[string][]string{"reason": {"budget", "provider", "budget-handed-back", "provider-handed-back"}}},
	{metrics.ModelFailovers, counter, "", map[string][]string{"from": nil, "to": nil, "step": {"triage", "assess"}}},
	{metrics.TriageToolCalls, counter, "", map[string][]string{
		"tool":    {"lookup_policy", "get_document_text", "prior_claims", "flag_fraud_signal", "unknown"},
		"outcome": {"ok", "refused"}}},
	{metrics.TriageReviews, counter, "", map[string][]string{"cause": {"cap", "model"}}},
	{metrics.DeploymentUnknownBuilds, gauge, "", nil},
	{metrics.ForeignWorkflowTasks, counter, "", nil},
	{metrics.ActivityRefusals, counter, "", map[string][]string{
		"activity": {"LoadClaim", "OpenApproval", "CallTool", "TriageTurn", "TriageClaim", "AssessClaim", "PayClaimant",
			"NotifyClaimant", "RemindApprovers", "EscalateApproval", "CloseClaim", "WriteAudit", "ReconcilePayments", "other"},
		"code": nil}},
}

// promBase is the name of m's series without the _total of counters and the
// _bucket, _count and _sum of histograms.
func (m ourMetric) promBase() string {
	if m.unit == "" || strings.HasSuffix(m.name, "_"+m.unit) {
		return m.name
	}
	return m.name + "_" + m.unit
}

// series returns the Prometheus names of m's series.
func (m ourMetric) series() []string {
	base := m.promBase()
	switch m.kind {
	case counter:
		return []string{base + "_total"}
	case gauge:
		return []string{base}
	default:
		return []string{base + "_bucket", base + "_count", base + "_sum"}
	}
}

// Tags of the Temporal SDK's metrics handler: every metric recorded through
// it carries those of the context it is recorded in.
var (
	sdkTags      = []string{"namespace", "client_name", "worker_type", "workflow_type", "activity_type", "task_queue"}
	temporalTags = append(append([]string{}, sdkTags...), "poller_type", "operation", "failure_reason", "status_code")
)

// Series that are not ours, so not derived from internal/metrics: the
// Temporal SDK's own metrics (go.temporal.io/sdk internal/common/metrics
// names, exported by the same exporter), the Go runtime and process
// collectors that package metricsprom registers, and `up`, which Prometheus adds
// for every scraped target.
var (
	temporalCounters = []string{"temporal_workflow_completed_total", "temporal_workflow_failed_total",
		"temporal_workflow_canceled_total", "temporal_workflow_continue_as_new_total",
		"temporal_activity_execution_failed_total", "temporal_workflow_task_execution_failed_total",
		"temporal_request_failure_total", "temporal_long_request_failure_total",
		"temporal_sticky_cache_forced_eviction_total"}
	temporalGauges = []string{"temporal_sticky_cache_size", "temporal_worker_task_slots_available",
		"temporal_worker_task_slots_used", "temporal_num_pollers"}
	temporalHistograms = []string{"temporal_activity_execution_latency_seconds", "temporal_activity_schedule_to_start_latency_seconds",
		"temporal_workflow_task_execution_latency_seconds", "temporal_workflow_task_schedule_to_start_latency_seconds",
		"temporal_workflow_task_replay_latency_seconds", "temporal_workflow_endtoend_latency_seconds",
		"temporal_activity_succeed_endtoend_latency_seconds", "temporal_request_latency_seconds"}
	runtimeSeries    = []string{"go_goroutines", "process_resident_memory_bytes"}
	prometheusSeries = []string{"up"}
)

// knownMetrics is every series the alerts and the dashboard may use: what a
// worker's /metrics serves (Temporal SDK, durableclaims' own, Go runtime)
// plus Prometheus' `up`. Each maps its labels to their allowed values (nil:
// any value). A name that is not here (a typo, a unit suffix the exporter
// does not add) would make a panel silently empty or an alert never fire.
//
// Histograms expand to _bucket (with le), _count and _sum.
var knownMetrics = func() map[string]map[string][]string {
	m := map[string]map[string][]string{}
	add := func(name string, base []string, labels map[string][]string) {
		l := map[string][]string{"job": {workerJob}, "instance": nil}
		for _, b := range base {
			l[b] = nil
		}
		for k, v := range labels {
			l[k] = v
		}
		m[name] = l
	}
	hist := func(name string, base []string, labels map[string][]string) {
		add(name+"_count", base, labels)
		add(name+"_sum", base, labels)
		add(name+"_bucket", base, labels)
		m[name+"_bucket"]["le"] = nil
	}
	for _, c := range temporalCounters {
		add(c, temporalTags, nil)
	}
	for _, g := range temporalGauges {
		add(g, temporalTags, nil)
	}
	for _, h := range temporalHistograms {
		hist(h, temporalTags, nil)
	}
	// durableclaims' own are recorded through the SDK handler, so they carry
	// its tags too.
	for _, om := range ourMetrics {
		switch om.kind {
		case counter, gauge:
			add(om.series()[0], sdkTags, om.labels)
		default:
			hist(om.promBase(), sdkTags, om.labels)
		}
	}
	for _, s := range append(append([]string{}, runtimeSeries...), prometheusSeries...) {
		add(s, nil, nil)
	}
	return m
}()

// metricConstants reads the exported string constants of internal/metrics
// from its source: constant name -> value.
func metricConstants(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "internal", "metrics")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					consts[name.Name] = v
				}
			}
		}
	}
	require.NotEmpty(t, consts, "no constants found in %s", dir)
	return consts
}

// Adding a metric to internal/metrics must not leave it unchecked: every
// name constant there is in ourMetrics, so alerts and panels may read it
// under its exported names, and ourMetrics names nothing else.
func TestKnownMetricsFollowInternalMetrics(t *testing.T) {
	consts := metricConstants(t)
	listed := map[string]int{}
	for _, om := range ourMetrics {
		listed[om.name]++
	}
	names := map[string]bool{}
	for ident, v := range consts {
		if strings.HasPrefix(ident, "Tool") {
			// Not a metric: a value of the idempotency metrics' tool label.
			assert.Contains(t, idempotencyTools, v, "metrics.%s is a tool: add it to idempotencyTools", ident)
			continue
		}
		names[v] = true
		assert.Equal(t, 1, listed[v], "metrics.%s = %q must be in ourMetrics once (with its kind and labels), or alerts and panels reading it go unchecked", ident, v)
	}
	for name := range listed {
		assert.True(t, names[name], "ourMetrics lists %q, which is no metric name constant of internal/metrics", name)
	}
	for _, om := range ourMetrics {
		for _, s := range om.series() {
			assert.Contains(t, knownMetrics, s, "%s (of metrics constant %q)", s, om.name)
		}
	}
	// And the reverse: every known series is derived from a constant, or
	// listed as not ours.
	derived := map[string]bool{}
	for _, om := range ourMetrics {
		for _, s := range om.series() {
			derived[s] = true
		}
	}
	notOurs := map[string]bool{}
	for _, list := range [][]string{temporalCounters, temporalGauges, runtimeSeries, prometheusSeries} {
		for _, s := range list {
			notOurs[s] = true
		}
	}
	for _, h := range temporalHistograms {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			notOurs[h+suffix] = true
		}
	}
	for s := range knownMetrics {
		assert.True(t, derived[s] != notOurs[s], "%s must be derived from internal/metrics or listed as not ours, not both or neither", s)
	}
}

var sampleName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]`)

// The names ourMetrics derives are the ones the worker serves: each metric
// is recorded the way its kind says, through the worker's own registry and
// SDK handler (worker/metricsprom), from a workflow, and /metrics is read back.
func TestDerivedSeriesNamesAreWhatTheWorkerExports(t *testing.T) {
	p, err := metricsprom.New()
	require.NoError(t, err)
	defer p.Close()

	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(p.Handler)
	env := suite.NewTestWorkflowEnvironment()
	record := func(ctx workflow.Context) error {
		h := workflow.GetMetricsHandler(ctx)
		for _, om := range ourMetrics {
			switch om.kind {
			case counter:
				metrics.Count(ctx, om.name, nil)
			case gauge:
				h.Gauge(om.name).Update(1)
			case timer:
				h.Timer(om.name).Record(time.Second)
			case histogram:
				metrics.Observe(ctx, om.name, 1, nil)
			}
		}
		return nil
	}
	env.RegisterWorkflowWithOptions(record, workflow.RegisterOptions{Name: "RecordEveryMetric"})
	env.ExecuteWorkflow("RecordEveryMetric")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	rec := httptest.NewRecorder()
	p.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	served := map[string]bool{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if m := sampleName.FindStringSubmatch(line); m != nil {
			served[m[1]] = true
		}
	}
	derived := map[string]bool{}
	for _, om := range ourMetrics {
		for _, s := range om.series() {
			derived[s] = true
			assert.True(t, served[s], "metric %q: the worker does not serve %s", om.name, s)
		}
	}
	var ours []string
	for s := range served {
		switch {
		case strings.HasPrefix(s, "temporal_"), strings.HasPrefix(s, "go_"), strings.HasPrefix(s, "process_"),
			strings.HasPrefix(s, "promhttp_"), s == "target_info":
			continue // the SDK's, the runtime's, the exporter's
		}
		ours = append(ours, s)
		assert.True(t, derived[s], "the worker serves %s, which ourMetrics does not derive", s)
	}
	sort.Strings(ours)
	t.Log(ours)
}
