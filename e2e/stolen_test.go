package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// TestAStolenPaymentTaskIsWorthNothing is issue 42's thief on a server that
// is not the insurer's own (the dev server: anyone who reaches the frontend
// may poll any task queue). The rogue reads the worker's deployment
// version from the server, polls the claims' queue as that version, and
// takes an approved claim's payment task: its input, the payee and the
// amount, is ciphertext to anyone without the payload keys. The rogue then
// answers the task with a payment of its own invention: the claim is not
// closed paid on that word, but dead-lettered, with the refusal recorded
// and alerted, and no money moved.
func TestAStolenPaymentTaskIsWorthNothing(t *testing.T) {
	w := newWorld(t)
	id := "claim-e2e-stolen"
	w.env = append(w.env, "RECONCILE_EVERY=0")

	// The worker dies just as it takes the payment (before any effect),
	// and nobody restarts it: the payment's retry waits in the queue.
	crashed := exec.Command(filepath.Join(w.bin, "worker"), "--crash-at", id+":6:before-effect",
		"--crash-state", filepath.Join(t.TempDir(), "crash-fired"))
	crashed.Env = append(os.Environ(), w.env...)
	var out strings.Builder
	crashed.Stdout, crashed.Stderr = &out, &out
	require.NoError(t, crashed.Start())
	exited := make(chan error, 1)
	go func() { exited <- crashed.Wait() }()
	t.Cleanup(func() { _ = crashed.Process.Kill() })

	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	w.approve(id, "adjuster-17")
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("the worker never reached the payment:\n%s", out.String())
	}

	// The thief: the raw gRPC API, no payload keys, the worker's version
	// read from the server.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	thief := w.thief(ctx)
	task := thief.activityTask(ctx)
	require.Equal(t, "PayClaimant", task.GetActivityType().GetName(), "the thief took the payment task")

	// What it took is ciphertext: no payee, no amount, no name.
	for _, p := range task.GetInput().GetPayloads() {
		assert.Equal(t, codec.MetadataEncodingEncrypted, string(p.GetMetadata()[converter.MetadataEncoding]), "the payment's input is encrypted")
		for _, secret := range []string{"acct_1Ada", "184000", "1840", "Ada Lovelace", id + ":step6"} {
			assert.NotContains(t, string(p.GetData()), secret, "%q in clear in a stolen task", secret)
		}
	}
	var in activities.PayInput
	assert.Error(t, converter.GetDefaultDataConverter().FromPayloads(task.GetInput(), &in), "without the keys the input does not decode")

	// The thief answers it: "paid", by a transfer it made up.
	forged, err := converter.GetDefaultDataConverter().ToPayloads(activities.PayResult{TransferID: "tr_forged", AmountMinor: 184000,
		Currency: "usd", Destination: "acct_1Ada"})
	require.NoError(t, err)
	_, err = thief.c.WorkflowService().RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
		Namespace: "default", TaskToken: task.GetTaskToken(), Result: &commonpb.Payloads{Payloads: forged.GetPayloads()}, Identity: "thief"})
	require.NoError(t, err, "the dev server takes the thief's answer")

	// The real worker carries on from the thief's answer: it believes no
	// word of it.
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	res := w.result(id)
	require.Equal(t, workflows.StatusDeadLettered, res.Status, "a forged payment closes no claim")
	require.NotNil(t, res.DeadLetter)
	assert.Equal(t, activities.ErrForeignRun, res.DeadLetter.ErrorType, "refused as an outcome whose facts do not hold")
	assert.Contains(t, res.DeadLetter.Error, "tr_forged")
	n, _ := w.transfers(id)
	assert.Zero(t, n, "no money moved")
	assert.Zero(t, w.mails(id), "the claimant is told nothing on the thief's word")
	assert.Contains(t, worker.Output(), "ALERT: activity refused")
	out2, err := w.ctl("audit", id)
	require.NoError(t, err, out2)
	assert.Contains(t, out2, "tr_forged", "the refusal is on the claim's record")
	// The claim file keeps what the run believed: verify flags it.
	require.Eventually(t, func() bool {
		out, _ := w.ctl("verify", "--json", id)
		return strings.Contains(out, `"check":"payment"`) && strings.Contains(out, "names transfer tr_forged")
	}, time.Minute, 500*time.Millisecond, "claimsctl verify never flagged the forged payment")
}
