package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/workflows"
)

// tracingWorkload is what tracing costs (make bench, -only tracing): the
// auto-approve claim with every program exporting its spans to Jaeger
// all-in-one (-jaeger, make jaeger) against the same claim with tracing
// off, in one run. Two workers of this build run side by side on task
// queues of their own, one with OTEL_EXPORTER_OTLP_ENDPOINT set; the bench
// starts the traced claims as bin/starter does with tracing on
// (telemetry.Start: a claim.intake root, the blob upload and store
// statements as its spans, the SDK's interceptor), the others with no
// span. Both export a batch every 100 ms, and each window waits for the
// last before it reads the CPU, so a window is charged for its own spans.
// Repetitions alternate off and on, -n claims each; the figure is the CPU
// of the stack's processes a claim (Jaeger's counted with tracing on
// only, as it would not run with tracing off), on over off.
type tracingWorkload struct {
	jaeger, config string
}

func (*tracingWorkload) names() []string { return []string{"tracing"} }

func (tw *tracingWorkload) flags(fs *flag.FlagSet) {
	fs.StringVar(&tw.jaeger, "jaeger", "bin/jaeger", "the tracing workload: Jaeger all-in-one (make jaeger)")
	fs.StringVar(&tw.config, "jaeger-config", "deploy/jaeger/local.yaml", "the tracing workload: Jaeger's configuration")
}

func (tw *tracingWorkload) preflight() error {
	for _, f := range []string{tw.jaeger, tw.config} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("tracing: Jaeger all-in-one is needed (make jaeger): %w", err)
		}
	}
	return nil
}

func (tw *tracingWorkload) run(ctx context.Context, e *env, res *results) error {
	jaeger, otlp, err := e.startJaeger(tw.jaeger, tw.config)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() { _ = jaeger.Process.Kill() }()
	const offQueue, onQueue = "bench-tracing-off", "bench-tracing-on"
	off, err := e.spawnClaimsWorker("tracing-off", "CLAIMS_TASK_QUEUE="+offQueue)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer off.stop()
	on, err := e.spawnClaimsWorker("tracing-on", "CLAIMS_TASK_QUEUE="+onQueue,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp, "OTEL_SERVICE_NAME=worker", "OTEL_BSP_SCHEDULE_DELAY="+traceBatchDelay)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer on.stop()

	// The bench starts the traced claims as bin/starter does with tracing
	// on: telemetry.Start from the same variables, read while set here
	// and unset at once, so no process the bench starts later inherits
	// them.
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_BSP_SCHEDULE_DELAY": traceBatchDelay,
		"OTEL_SERVICE_NAME": "starter"}
	for k, v := range env {
		os.Setenv(k, v)
	}
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	_, stopTracing, err := telemetry.Start(ctx, "starter")
	for k := range env {
		os.Unsetenv(k)
	}
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	}()
	tp := otel.GetTracerProvider()
	ti, err := telemetry.TemporalInterceptor(tp)
	if err != nil {
		return fmt.Errorf("tracing: interceptor: %w", err)
	}
	traced, err := client.NewClientFromExisting(e.client, client.Options{Namespace: "default",
		DataConverter: e.dc, FailureConverter: e.fc, Interceptors: []interceptor.ClientInterceptor{ti}})
	if err != nil {
		return fmt.Errorf("tracing: client: %w", err)
	}
	defer traced.Close()
	intake := telemetry.Tracer()
	// A window ends once the bench's spans are sent and the worker's last
	// batch is due: both are charged to the window that made them.
	settle := func(ctx context.Context) {
		if f, ok := tp.(interface{ ForceFlush(context.Context) error }); ok {
			_ = f.ForceFlush(ctx)
		}
		time.Sleep(3 * traceBatchDelayDuration)
	}

	flows := map[string]flow{
		"off": {key: "tracing_off", name: "auto-approve claim, tracing off", want: workflows.StatusPaid, settle: settle,
			start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
				id := fmt.Sprintf("bench-trace-off-%05d-%d", i, seq.Add(1))
				return e.startClaimOn(ctx, e.store, e.client, offQueue, id, "640.00", workflows.Options{})
			}},
		"on": {key: "tracing_on", name: "auto-approve claim, tracing to Jaeger", want: workflows.StatusPaid, settle: settle,
			start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
				id := fmt.Sprintf("bench-trace-on-%05d-%d", i, seq.Add(1))
				ctx, span := intake.Start(ctx, "claim.intake", trace.WithAttributes(attribute.String(telemetry.AttrClaimID, id)))
				defer span.End()
				return e.startClaimOn(ctx, e.store, traced, onQueue, id, "640.00", workflows.Options{})
			}},
	}
	groups := map[string][]cpuGroup{
		"off": {{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{off.cmd.Process.Pid}},
			{name: "bench", pids: []int{os.Getpid()}}},
		"on": {{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{on.cmd.Process.Pid}},
			{name: "bench", pids: []int{os.Getpid()}}, {name: "jaeger", pids: []int{jaeger.Process.Pid}}},
	}
	// Warm both up, then alternate.
	for _, k := range []string{"off", "on"} {
		if _, err := e.throughput(ctx, flows[k], min(e.o.n, 50)); err != nil {
			return fmt.Errorf("tracing: warm-up %s: %w", k, err)
		}
	}
	// The stack's own CPU a claim (server, worker, the bench as the
	// starter, Jaeger) is the machine's CPU on a machine that runs only it.
	use := map[string]*cpuUsage{"off": {}, "on": {}}
	var pairs []float64 // each repetition's on over off: the windows side by side
	reps := max(e.o.reps, 2)
	for rep := 1; rep <= reps; rep++ {
		order := []string{"off", "on"}
		if rep%2 == 0 {
			order = []string{"on", "off"}
		}
		this := map[string]float64{}
		for _, k := range order {
			var u cpuUsage
			rate, err := e.measure(ctx, flows[k], e.o.n, groups[k], &u)
			if err != nil {
				return fmt.Errorf("tracing: %s: %w", flows[k].name, err)
			}
			use[k].merge(u)
			this[k] = u.stackMS(groups[k], e.o.n)
			res.add(flows[k].key+"_per_s", rate)
			fmt.Fprintf(os.Stderr, "  rep %d %-40s %7.1f /s, %5.1f ms a claim\n", rep, flows[k].name, rate, this[k])
		}
		pairs = append(pairs, this["on"]/this["off"])
	}
	res.setSamples("tracing_cost_ratio_pairs", pairs)
	for k, u := range use {
		u.record(res, flows[k].key, e.o.n*reps)
	}
	// The figures: the median of the repetitions' ratios (a window that
	// one burst of other work slowed moves one pair, not the figure), and
	// the stack's CPU a claim over all of them. The machine's busy time
	// is printed beside it: on a shared host it also counts the
	// neighbours'.
	claims := e.o.n * reps
	stack := func(k string) float64 { return use[k].stackMS(groups[k], claims) }
	sorted := slices.Sorted(slices.Values(pairs))
	res.Values["tracing_cost_ratio_median"] = percentile(sorted, 50)
	fmt.Fprintf(os.Stderr, "  tracing: on over off, repetition by repetition: %s; median %+.1f %%\n", pctList(pairs), 100*(percentile(sorted, 50)-1))
	machine := func(k string) float64 { return msPerClaim(use[k], "machine_busy", claims) }
	offMS, onMS := stack("off"), stack("on")
	res.Values["tracing_off_cpu_ms"], res.Values["tracing_on_cpu_ms"] = offMS, onMS
	res.Values["tracing_cost_ratio"] = onMS / offMS
	res.Values["tracing_machine_cost_ratio"] = machine("on") / machine("off")
	fmt.Fprintf(os.Stderr, "  tracing: the stack's CPU a claim %.1f ms off, %.1f ms on (worker %.1f → %.1f, server %.1f → %.1f, bench %.1f → %.1f, Jaeger %.1f): %+.1f %%\n",
		offMS, onMS, msPerClaim(use["off"], "worker", claims), msPerClaim(use["on"], "worker", claims),
		msPerClaim(use["off"], "server", claims), msPerClaim(use["on"], "server", claims),
		msPerClaim(use["off"], "bench", claims), msPerClaim(use["on"], "bench", claims),
		msPerClaim(use["on"], "jaeger", claims), 100*(onMS/offMS-1))
	fmt.Fprintf(os.Stderr, "  tracing: the machine's busy CPU a claim %.1f ms off, %.1f ms on (steal %.1f, %.1f): %+.1f %%\n",
		machine("off"), machine("on"), msPerClaim(use["off"], "machine_steal", claims), msPerClaim(use["on"], "machine_steal", claims),
		100*(machine("on")/machine("off")-1))
	return nil
}

// traceBatchDelay is how often the traced programs export a batch.
const (
	traceBatchDelay         = "100"
	traceBatchDelayDuration = 100 * time.Millisecond
)

// pctList prints ratios as percentages over 1.
func pctList(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%+.1f %%", 100*(r-1))
	}
	return strings.Join(parts, ", ")
}

// startJaeger runs bin/jaeger on deploy/jaeger/local.yaml with addresses
// of its own, and returns it with its OTLP/gRPC endpoint once its query
// service answers.
func (e *env) startJaeger(bin, config string) (*exec.Cmd, string, error) {
	addrs := map[string]string{}
	for _, v := range []string{"JAEGER_OTLP_GRPC_ADDR", "JAEGER_OTLP_HTTP_ADDR", "JAEGER_UI_ADDR", "JAEGER_QUERY_GRPC_ADDR", "JAEGER_HEALTH_ADDR"} {
		a, err := freeAddr()
		if err != nil {
			return nil, "", err
		}
		addrs[v] = a
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = os.Environ()
	for k, v := range addrs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.Create(filepath.Join(e.dir, "jaeger.log"))
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start jaeger: %w", err)
	}
	p := &proc{name: "jaeger", cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	e.children = append(e.children, p)
	for range 300 {
		if resp, err := http.Get("http://" + addrs["JAEGER_UI_ADDR"] + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, "http://" + addrs["JAEGER_OTLP_GRPC_ADDR"], nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, "", fmt.Errorf("jaeger did not come up; see %s", filepath.Join(e.dir, "jaeger.log"))
}
