package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
)

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A batch with one malformed claim starts nothing, and says which field is
// wrong and why; starting a claim twice never makes a second run.
func TestStarterValidatesFirstAndNeverStartsTwice(t *testing.T) {
	w := newWorld(t)
	good := w.claimFile("claim-e2e-start", "640.00")
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"claim_id":"claim-e2e-bad","policy_id":"pol-1001",
		"claimant":{"name":"B","email":"b@example.com","stripe_account":"acct_1B"},"amount":"12.345","currency":"usd"}`), 0o644))

	starter := filepath.Join(w.bin, "starter")
	out, err := testenv.Run(t, w.env, starter, good, bad)
	assert.Equal(t, 2, exitCode(err), out)
	assert.Contains(t, out, bad+": amount: \"12.345\" has more than 2 decimal places for USD")
	assert.Contains(t, out, "nothing started")
	_, err = w.client.DescribeWorkflow(context.Background(), "claim-e2e-start", "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "the valid claim in a bad batch must not start")
	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.GetClaim(context.Background(), "claim-e2e-start")
	assert.ErrorIs(t, err, store.ErrNotFound, "nor be registered")

	out, err = testenv.Run(t, w.env, starter, "--claim-id", "claim-e2e-flags", "--policy", "pol-1001", "--name", "F",
		"--email", "f@example.com", "--account", "acct_1F", "--amount", "-5")
	assert.Equal(t, 2, exitCode(err), out)
	assert.Contains(t, out, "flags: amount:")

	// No worker runs: the claim stays running, and a second start finds it.
	out, err = testenv.Run(t, w.env, starter, good)
	require.NoError(t, err, out)
	assert.Contains(t, out, "started claim-e2e-start")
	assert.Contains(t, out, `if it waits for a decision (claimsctl wait claim-e2e-start --status waiting): temporal workflow update execute --workflow-id claim-e2e-start --name decide --input "$(claimsctl receipt approve claim-e2e-start --key YOUR.key)"`)
	first, err := w.client.DescribeWorkflow(context.Background(), "claim-e2e-start", "")
	require.NoError(t, err)

	out, err = testenv.Run(t, w.env, starter, good)
	require.NoError(t, err, out)
	assert.Contains(t, out, "claim-e2e-start already exists (run "+first.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	assert.Contains(t, out, "not starting another")
}

// A surge is started in bulk: a directory of claim files, many at a time,
// at the priority asked for, with progress on stderr. Killed midway (SIGKILL: no chance to tidy up),
// the same command resumes: every claim ends up with exactly one run, the
// ones started before the kill are reported as already started.
func TestStarterStartsASurgeAndResumesAfterAKill(t *testing.T) {
	w := newWorld(t)
	const n = 400
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "photo.jpg"), []byte("hail on the roof"), 0o644))
	for i := range n {
		id := fmt.Sprintf("claim-e2e-surge-%04d", i)
		doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001","claimant":{"name":"Ada Lovelace","email":"ada%d@example.com","stripe_account":"acct_1Ada%d"},
			"amount":"1840.00","currency":"usd","description":"Hail broke the roof tiles","documents":[{"name":"photo.jpg","path":"photo.jpg"}]}`, id, i, i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, id+".json"), []byte(doc), 0o644))
	}
	starter := filepath.Join(w.bin, "starter")
	args := []string{"--concurrency", "8", "--progress", "200ms", "--priority", "4", dir}

	// First pass: kill it once a quarter of the claims have started.
	cmd := exec.Command(starter, args...)
	cmd.Env = append(os.Environ(), w.env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	first := map[string]string{} // claim -> run, as the first pass printed them
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := startedLine.FindStringSubmatch(sc.Text()); m != nil {
			first[m[1]] = m[2]
			if len(first) == n/4 {
				require.NoError(t, cmd.Process.Kill())
				break
			}
		}
	}
	go io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	require.Len(t, first, n/4, "the first pass started claims before it was killed")
	assert.Contains(t, stderr.String(), "/400 claims (", "a batch reports its progress")

	// Second pass: the same command finishes the batch.
	begin := time.Now()
	out, err := testenv.Run(t, w.env, starter, args...)
	require.NoError(t, err, out)
	took := time.Since(begin)
	assert.Contains(t, out, "starter: 400 claims in ")
	again, fresh := 0, 0
	for line := range strings.Lines(out) {
		if m := startedLine.FindStringSubmatch(line); m != nil {
			_, dup := first[m[1]]
			assert.False(t, dup, "%s started twice", m[1])
			fresh++
		}
		if m := alreadyLine.FindStringSubmatch(line); m != nil {
			if run, ok := first[m[1]]; ok {
				assert.Equal(t, run, m[2], "%s: the run the first pass started", m[1])
			}
			again++
		}
	}
	assert.Equal(t, n, fresh+again, out)
	assert.GreaterOrEqual(t, again, n/4, "every claim started before the kill is found, not started again")

	// The server agrees: one run per claim, no more (visibility catches up
	// within a moment; a second run of any claim would make it 401).
	ctx := context.Background()
	count := func() int64 {
		resp, err := w.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: `WorkflowId STARTS_WITH "claim-e2e-surge-"`})
		require.NoError(t, err)
		return resp.GetCount()
	}
	require.Eventually(t, func() bool { return count() >= n }, 30*time.Second, 200*time.Millisecond)
	time.Sleep(time.Second)
	assert.EqualValues(t, n, count(), "exactly one run per claim")
	desc, err := w.client.DescribeWorkflow(ctx, "claim-e2e-surge-0399", "")
	require.NoError(t, err)
	assert.EqualValues(t, 4, desc.RawResponse.GetWorkflowExecutionInfo().GetPriority().GetPriorityKey(), "started at the intake priority asked for")
	t.Logf("resumed %d claims (%d already started) in %s: %.0f a minute", n, again, took.Round(time.Millisecond), float64(n)/took.Minutes())
}

var (
	startedLine = regexp.MustCompile(`^started (claim-e2e-surge-\d+) \(run ([0-9a-f-]+)\)`)
	alreadyLine = regexp.MustCompile(`^(claim-e2e-surge-\d+) already exists \(run ([0-9a-f-]+),`)
)

// lockedBuffer is a bytes.Buffer a process and the test may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
