package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/testbed/otlpsink"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// The claimant's personal data, marked so that any of it in a span is
// found: no name, e-mail, payout account, description or document text may
// reach a trace.
var piiMarks = []string{"Zqx7Name Piiperson", "zqx7-mail@example.com", "acct_1Zqx7Account", "Zqx7Desc", "Zqx7DocText"}

// TestOneClaimOneTrace runs a claim over the limit through a signed
// approval with every program exporting by OTLP/gRPC to a receiver the
// test runs (testbed/otlpsink, the official proto types), kills the
// worker with SIGKILL right after Stripe made the payment, and reads what
// was exported: intake to the claim file under the one trace the starter
// began, each activity with its attempt, the model calls with their
// tokens, the Stripe POST twice with the same key (a stale list hides the
// first transfer from the retry's check) and the second a replay, the
// decision linked to the claim's trace, and none of the claimant's data.
func TestOneClaimOneTrace(t *testing.T) {
	sink, err := otlpsink.Start()
	require.NoError(t, err)
	defer sink.Close()
	w := newWorld(t)
	w.env = append(w.env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.GRPCEndpoint(), "OTEL_BSP_SCHEDULE_DELAY=100",
		"TRACE_URL_TEMPLATE=http://jaeger.test/trace/{trace_id}")
	const id = "claim-e2e-trace"
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"), "--crash-at", id+":6:after-effect",
		"--crash-state", filepath.Join(t.TempDir(), "crash-fired"))
	r := approvedAfterAKill(t, w, id)

	out, err := w.ctl("show", id)
	require.NoError(t, err, out)
	m := regexp.MustCompile(`(?m)^  trace ([0-9a-f]{32}) http://jaeger\.test/trace/([0-9a-f]{32})$`).FindStringSubmatch(out)
	require.NotNil(t, m, "claimsctl show prints the trace and its link:\n%s", out)
	traceID := m[1]
	assert.Equal(t, traceID, m[2])

	var spans []otlpsink.Span
	require.Eventually(t, func() bool {
		spans = sink.Spans()
		var audit, decided bool
		for _, s := range spans {
			audit = audit || s.Name == "RunActivity:WriteAudit" && s.TraceID == traceID
			decided = decided || s.Name == "claim.decide"
		}
		return audit && decided
	}, time.Minute, 200*time.Millisecond, "the worker exported the claim's last step, claimsctl its decision")
	time.Sleep(time.Second) // the last batches
	spans = sink.Spans()

	inTrace := map[string][]otlpsink.Span{}
	for _, s := range spans {
		if s.TraceID == traceID {
			inTrace[s.Name] = append(inTrace[s.Name], s)
		}
	}
	t.Logf("%d spans, %d names in the claim's trace", len(spans), len(inTrace))
	intake := inTrace["claim.intake"]
	require.Len(t, intake, 1, "the starter began the claim's trace")
	assert.Equal(t, "starter", intake[0].Resource["service.name"])
	assert.Empty(t, intake[0].ParentID, "the claim's trace is its own, not a batch's")
	start := inTrace["StartWorkflow:ClaimWorkflow"]
	require.Len(t, start, 1)
	assert.Equal(t, intake[0].SpanID, start[0].ParentID, "the start is part of the intake")
	for _, name := range []string{"blob put", "db INSERT claims"} {
		if assert.NotEmpty(t, inTrace[name], name) {
			assert.Equal(t, "starter", inTrace[name][0].Resource["service.name"], "%s at intake", name)
		}
	}
	for _, act := range []string{"LoadClaim", "TriageTurn", "AssessClaim", "OpenApproval", "PayClaimant", "NotifyClaimant", "CloseClaim", "WriteAudit"} {
		runs := inTrace["RunActivity:"+act]
		if assert.NotEmpty(t, runs, "%s ran under the claim's trace", act) {
			assert.Equal(t, "worker", runs[0].Resource["service.name"])
			assert.NotNil(t, runs[0].Attrs[telemetry.AttrAttempt], "%s says its attempt", act)
		}
	}
	// The payment's first attempt died with the worker after Stripe paid;
	// its second is attempt 2.
	var attempts []int64
	for _, s := range inTrace["RunActivity:PayClaimant"] {
		attempts = append(attempts, s.Attrs[telemetry.AttrAttempt].(int64))
	}
	assert.Contains(t, attempts, int64(2), "the retried payment is attempt 2")

	posts := inTrace["stripe POST /v1/transfers"]
	require.Len(t, posts, 2, "the payment POSTed twice: before the kill, and on the retry that the stale list misled")
	key := id + ":step6"
	for i, p := range posts {
		assert.Equal(t, key, p.Attrs[activities.AttrStripeIdempotencyKey], "POST %d carried the step's key", i+1)
		assert.Equal(t, r.TransferID, p.Attrs[activities.AttrStripeTransferID], "POST %d answered with the one transfer", i+1)
		assert.Equal(t, "CLIENT", strings.TrimPrefix(p.Kind, "SPAN_KIND_"))
	}
	assert.Equal(t, false, posts[0].Attrs[activities.AttrStripeReplayed], "the first POST made the transfer")
	assert.Equal(t, true, posts[1].Attrs[activities.AttrStripeReplayed], "the second was Stripe's replay")

	var chats int
	for name, ss := range inTrace {
		if !strings.HasPrefix(name, "chat ") {
			continue
		}
		for _, s := range ss {
			chats++
			assert.Equal(t, "chat", s.Attrs[telemetry.GenAIOperation])
			assert.NotEmpty(t, s.Attrs[telemetry.GenAIProvider])
			assert.NotEmpty(t, s.Attrs[telemetry.GenAIRequestModel])
			assert.Positive(t, s.Attrs[telemetry.GenAIInputTokens], "token usage")
			assert.Positive(t, s.Attrs[telemetry.GenAIOutputTokens], "token usage")
			assert.NotEmpty(t, s.Attrs[telemetry.GenAIFinishReasons])
		}
	}
	assert.GreaterOrEqual(t, chats, 3, "two triage turns and the assessment")
	for name := range inTrace {
		if strings.HasPrefix(name, "execute_tool ") {
			assert.Equal(t, "execute_tool", inTrace[name][0].Attrs[telemetry.GenAIOperation])
		}
	}
	assert.NotEmpty(t, inTrace["email send"], "the claimant's e-mail")
	var queries, blobs int
	for name, ss := range inTrace {
		switch {
		case strings.HasPrefix(name, "db "):
			queries += len(ss)
			assert.Equal(t, "sqlite", ss[0].Attrs["db.system.name"])
		case strings.HasPrefix(name, "blob "):
			blobs += len(ss)
		}
	}
	assert.Positive(t, queries, "the claims store's statements")
	assert.Positive(t, blobs, "the blob store")
	assert.NotEmpty(t, inTrace["blob verify"], "intake verified the document")
	assert.NotEmpty(t, inTrace["blob put_record"], "the claim file written")

	// The decision: claimsctl's own trace, linked to the claim's.
	var decisions []otlpsink.Span
	for _, s := range spans {
		if s.Name == "claim.decide" {
			decisions = append(decisions, s)
		}
	}
	require.Len(t, decisions, 1)
	d := decisions[0]
	assert.NotEqual(t, traceID, d.TraceID, "a decision days later holds no span of the claim's open")
	assert.Equal(t, []string{traceID}, d.LinkedTraceIDs, "it links the claim's trace")
	assert.Equal(t, "adjuster-17", d.Attrs[telemetry.AttrApprover])
	assert.Equal(t, "approve", d.Attrs[telemetry.AttrVerdict])

	for _, mark := range piiMarks {
		assert.False(t, sink.Contains([]byte(mark)), "%q reached a span", mark)
	}

	// The claim file records the trace.
	files := w.claimFiles(id)
	require.Len(t, files, 1)
	body, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var file struct {
		TraceID string `json:"trace_id"`
	}
	require.NoError(t, json.Unmarshal(body, &file))
	assert.Equal(t, traceID, file.TraceID, "the claim file records the trace")

	// Its history, trace headers and all, replays on a build without
	// tracing and on one with it (a replay exports no step again, and
	// continues the claim's trace). Each replay reads the history afresh:
	// the SDK's replayer changes the events it is given.
	dc, fc := testenv.Converters(t, w.env)
	exp := tracetest.NewInMemoryExporter()
	ti, err := telemetry.TemporalInterceptor(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	require.NoError(t, err)
	for _, ix := range [][]interceptor.WorkerInterceptor{nil, {ti}} {
		rp, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: fc, Interceptors: ix})
		require.NoError(t, err)
		rp.RegisterWorkflowWithOptions(workflows.ClaimWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowType})
		assert.NoError(t, rp.ReplayWorkflowHistoryWithOptions(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
			&historypb.History{Events: w.events(id)}, worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}),
			"replay with tracing: %v", ix != nil)
	}
	require.NotEmpty(t, exp.GetSpans())
	for _, s := range exp.GetSpans() {
		assert.Equal(t, traceID, s.SpanContext.TraceID().String(), "a replay continues the claim's trace")
		assert.True(t, strings.HasPrefix(s.Name, "RunWorkflow:"), "a replay exports no step again: %s", s.Name)
	}
}

// piiClaimFile is a claim over the limit whose claimant data are marked
// (piiMarks), with a text document the triage agent reads.
func (w *world) piiClaimFile(id, amount string) string {
	dir := w.t.TempDir()
	require.NoError(w.t, os.WriteFile(filepath.Join(dir, "report.txt"), []byte("Plumber's report "+piiMarks[4]+": burst pipe, water damage."), 0o644))
	path := filepath.Join(dir, id+".json")
	doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001","claimant":{"name":%q,"email":%q,"stripe_account":%q},
		"amount":%q,"currency":"usd","description":"%s: a burst pipe flooded the kitchen","documents":[{"name":"report.txt","path":"report.txt"}]}`,
		id, piiMarks[0], piiMarks[1], piiMarks[2], amount, piiMarks[3])
	require.NoError(w.t, os.WriteFile(path, []byte(doc), 0o644))
	return path
}

// Off, the real programs cost nothing: with OTEL_SDK_DISABLED=true beside
// an endpoint that a receiver listens on, a claim runs from intake to its
// file and nothing dials the receiver; the claim has no trace to show.
func TestTracingOffDialsNothing(t *testing.T) {
	sink, err := otlpsink.Start()
	require.NoError(t, err)
	defer sink.Close()
	w := newWorld(t)
	w.env = append(w.env, "OTEL_SDK_DISABLED=true", "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.GRPCEndpoint(), "OTEL_BSP_SCHEDULE_DELAY=100")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	const id = "claim-e2e-untraced"
	w.start(w.claimFile(id, "240.00"))
	require.Equal(t, workflows.StatusPaid, w.result(id).Status)
	out, err := w.ctl("show", id)
	require.NoError(t, err, out)
	assert.NotContains(t, out, "trace ")
	time.Sleep(500 * time.Millisecond) // past a batch's delay, had one been made
	assert.Zero(t, sink.Connections(), "no program dialled the receiver")
	assert.Empty(t, sink.Spans())
}

// approvedAfterAKill runs a claim carrying marked PII over the limit to
// its payment on a worker started with --crash-at id:6:after-effect: it
// parks, adjuster-17 approves it, the worker dies right after Stripe made
// the transfer, and the retry pays it; its result. A stale list hides the first
// transfer from the retry's check, so the retry POSTs again with the same
// key and Stripe answers with a replay.
func approvedAfterAKill(t *testing.T, w *world, id string) workflows.ClaimResult {
	fault := fmt.Sprintf(`{"fault":"stale-list","method":"GET","transfer_group":%q,"times":2}`, id)
	resp, err := http.Post(envValue(w.env, "STRIPE_API_BASE")+"/_sim/faults", "application/json", strings.NewReader(fault))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	w.start(w.piiClaimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	out, err := w.ctl("decide", "approve", id, "--key", filepath.Join(w.keys, "adjuster-17.key"))
	require.NoError(t, err, out)
	r := w.result(id)
	require.Equal(t, workflows.StatusPaid, r.Status)
	require.True(t, r.PaymentReplayed, "the retry's POST was answered as a replay")
	return r
}

// jaeger runs Jaeger all-in-one (bin/jaeger, built by make jaeger from
// tools/jaeger) on deploy/jaeger/local.yaml with every address its own:
// traces in memory, OTLP/gRPC in. It returns the OTLP endpoint and the
// query service's URL.
func jaeger(t *testing.T) (otlp, query string) {
	grpc, ui := freePort(t), freePort(t)
	env := []string{"JAEGER_OTLP_GRPC_ADDR=" + grpc, "JAEGER_UI_ADDR=" + ui, "JAEGER_OTLP_HTTP_ADDR=" + freePort(t),
		"JAEGER_QUERY_GRPC_ADDR=" + freePort(t), "JAEGER_HEALTH_ADDR=" + freePort(t)}
	testenv.Supervise(t, env, jaegerBin(t), "--config", filepath.Join(testenv.ModuleRoot(t), "deploy", "jaeger", "local.yaml"))
	query = "http://" + ui
	require.Eventually(t, func() bool {
		resp, err := http.Get(query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 200*time.Millisecond, "Jaeger's query service never answered")
	return "http://" + grpc, query
}

// jaegerBin is Jaeger all-in-one: bin/jaeger, built by make jaeger, or
// JAEGER_BIN.
func jaegerBin(t *testing.T) string {
	bin := os.Getenv("JAEGER_BIN")
	if bin == "" {
		bin = filepath.Join(testenv.ModuleRoot(t), "bin", "jaeger")
	}
	_, err := os.Stat(bin)
	require.NoError(t, err, "Jaeger all-in-one is needed: make jaeger builds bin/jaeger (or set JAEGER_BIN)")
	return bin
}

// jaegerHolds waits until Jaeger's query service at query holds trace id
// with the claim's last step, and returns what it holds.
func jaegerHolds(t *testing.T, query, id string) string {
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get(query + "/api/traces/" + id)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "RunActivity:WriteAudit")
	}, time.Minute, 250*time.Millisecond, "Jaeger never held the claim's last step")
	return string(body)
}

// TestAClaimsTraceInJaegerAndTheInbox is the trace an operator opens: a
// claim over the limit, its worker SIGKILLed right after Stripe paid, every
// program exporting to a real Jaeger. claimsctl show links the inbox's
// trace page; an adjuster who may see the claim opens it in Chromium and
// finds intake to the claim file under one trace, the payment's two
// attempts and both POSTs with their one key, and none of the claimant's
// data, in the page or in what Jaeger holds; an adjuster who may not see
// the claim is refused its trace. The picture in
// docs/images/trace.png is this page (var/screenshots/trace.png).
func TestAClaimsTraceInJaegerAndTheInbox(t *testing.T) {
	otlp, query := jaeger(t)
	const id = "claim-e2e-jaeger"
	b := newBrowserWorldWith(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_BSP_SCHEDULE_DELAY=100", "JAEGER_QUERY_URL=" + query},
		"--crash-at", id+":6:after-effect", "--crash-state", filepath.Join(t.TempDir(), "crash-fired"))
	approvedAfterAKill(t, b.world, id)

	out, err := b.ctl("show", id)
	require.NoError(t, err, out)
	m := regexp.MustCompile(`(?m)^  trace ([0-9a-f]{32}) (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "claimsctl show prints the trace and its link:\n%s", out)
	traceID, link := m[1], m[2]
	assert.Equal(t, b.inbox+"/traces/"+traceID, link, "the link is the inbox's trace page")

	// Jaeger holds the claim's last step once the worker's batch is sent.
	raw := jaegerHolds(t, query, traceID)
	for _, mark := range piiMarks {
		assert.NotContains(t, raw, mark, "the claimant's data reached Jaeger")
	}

	ctx := b.signIn("adjuster-17")
	b.open(ctx, id)
	href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#trace a"), "href"))
	require.NoError(t, err)
	assert.Equal(t, link, href.Value, "the claim page links its trace")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("ol.waterfall"))))
	names, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("ol.waterfall > li .span-name")].map(e => e.textContent.trim())`))
	require.NoError(t, err)
	count := func(suffix string) (n int) {
		for _, name := range names {
			if strings.HasSuffix(strings.TrimSuffix(name, " ✕"), suffix) {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, count("claim.intake"), "one intake: %q", names)
	assert.Equal(t, 1, count("RunActivity:WriteAudit"), "the claim file at the end")
	assert.GreaterOrEqual(t, count("RunActivity:PayClaimant"), 1, "the payment's retry (the killed attempt's span never ended)")
	assert.Equal(t, 2, count("stripe POST /v1/transfers"), "the payment POSTed twice, once before the kill and once on the retry")
	page, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	require.NoError(t, err)
	assert.Contains(t, page, id+":step6", "the payment's idempotency key is on the page")
	for _, mark := range piiMarks {
		assert.NotContains(t, page, mark, "the claimant's data on the trace page")
	}
	b.screenshot(ctx, "trace")

	// An adjuster whose limit (1,500.00) is below the claim and who took
	// no part in it is refused its trace, link in hand.
	low := b.signIn("adjuster-9")
	require.NoError(t, chromedp.Do(low, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("main"))))
	page, err = chromedp.Run(low, chromedp.Text(chromedp.CSS("main")))
	require.NoError(t, err)
	assert.Contains(t, page, "this claim is not for you")
	n, err := chromedp.Run(low, chromedp.Evaluate[int](`document.querySelectorAll("ol.waterfall > li").length`))
	require.NoError(t, err)
	assert.Zero(t, n, "no span of the claim's trace is drawn for adjuster-9")
}
