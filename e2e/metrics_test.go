package e2e

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func scrape(t *testing.T, addr string) string {
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == 200
	}, 10*time.Second, 100*time.Millisecond)
	return string(body)
}

// value sums the samples of a metric whose labels match labelRE.
func value(text, name, labelRE string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} ([0-9.e+-]+)$`)
	lre := regexp.MustCompile(labelRE)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if lre.MatchString(m[1]) {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
		}
	}
	return sum
}

// After a run with a crash inside the payment, the worker's /metrics shows
// the SDK's metrics and ours moving as they should: the retried payment is a
// replay and a resume, the claim is counted paid, its history size observed.
func TestMetricsAfterACrash(t *testing.T) {
	w := newWorld(t)
	addr := freePort(t)
	env := append(append([]string{}, w.env...), "METRICS_ADDR="+addr)
	testenv.Supervise(t, env, filepath.Join(w.bin, "worker"),
		"--crash-at", "claim-e2e-metrics:6:after-effect", "--crash-state", filepath.Join(t.TempDir(), "fired"))
	w.start(w.claimFile("claim-e2e-metrics", "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-e2e-metrics").Status)

	// The counters live in the replacement worker: the one that resumed.
	var text string
	require.Eventually(t, func() bool {
		text = scrape(t, addr)
		return value(text, "claims_completed_total", `status="paid"`) >= 1
	}, 20*time.Second, 250*time.Millisecond, "claims_completed_total never reached 1")
	assert.Equal(t, 1.0, value(text, "idempotency_replays_total", `tool="stripe"`), "the retried payment found the original transfer")
	assert.Zero(t, value(text, "idempotency_conflicts_total", `.*`))
	assert.GreaterOrEqual(t, value(text, "claim_resumes_total", `kind="activity"`), 1.0, "the payment ran again: attempt 2")
	assert.Positive(t, value(text, "claim_history_bytes_count", `step="pay"`), "history size observed after the pay step")
	assert.Positive(t, value(text, "claim_step_duration_seconds_count", `step="close"`))
	assert.Regexp(t, `(?m)^temporal_activity_execution_latency_seconds_count\{`, text, "the SDK's own metrics are exported too")
	assert.Regexp(t, `(?m)^go_goroutines `, text)
}
