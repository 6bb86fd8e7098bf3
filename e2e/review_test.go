package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// A claimant's review on a real dev server (docs/law.md, "A person for an
// automated decision"): a California claim of 1,500.00 that the model
// assessed at half is paid 750.00 by the rules alone, and its partial
// letter offers a person's review; the claimant asks for one with the real
// starter; the review claim waits for a person although 750.00 is under
// the auto-approve limit; a supervisor approves it with claimsctl decide;
// stripesim then holds exactly one transfer per claim ID, 1,500.00 in all,
// which is what the policy covers; both claim files verify, and the
// review's names what it reviews, who asked and why.
func TestAClaimantsReviewGoesToAPersonAndPaysTheRestOnce(t *testing.T) {
	w := newWorld(t)
	const id, review = "claim-e2e-rv", "claim-e2e-rv-review"
	sim := modelsim.New("sk-sim")
	answers, err := modelsim.ParseAnswers(id + ":recommend=50%")
	require.NoError(t, err)
	sim.Answers = answers
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	w.env = append(w.env, "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+srv.URL+"/v1", "MODEL_NAME=sim-1", "MODEL_API_KEY=sk-sim")
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	defer worker.Stop()
	starter := filepath.Join(w.bin, "starter")

	w.start(w.claimFile(id, "1500.00")) // pol-1001: US-CA, no deductible
	r := w.result(id)
	require.Equal(t, workflows.StatusPaid, r.Status, r.Reason)
	require.NotNil(t, r.Decided)
	assert.Equal(t, workflows.DecidedByRules, r.Decided.By, "no person decided it")
	assert.Equal(t, int64(75000), r.PayoutMinor)
	letter, err := os.ReadFile(filepath.Join(w.mail, id+".step7@durableclaims.eml"))
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(letter)), " "), "You may ask for a person to review it within 30 days",
		"the partial letter offers a person's review")

	// Asking without a reason is refused, and starts nothing.
	out, err := testenv.Run(t, w.env, starter, "--review-of", id, "--reason", " ")
	require.Error(t, err)
	assert.Contains(t, out, "a reason is required")

	out, err = testenv.Run(t, w.env, starter, "--review-of", id, "--reason", "the invoice says 1500.00")
	require.NoError(t, err, out)
	assert.Contains(t, out, "review of "+id+" requested by ada@example.com")
	assert.Contains(t, out, "started "+review)
	w.waitStatus(review, workflows.StatusWaiting)
	st := w.status(review)
	require.NotNil(t, st.ReviewOf)
	assert.Equal(t, id, st.ReviewOf.Of)
	assert.Equal(t, "the invoice says 1500.00", st.ReviewOf.Reason)
	require.NotNil(t, st.Approval)
	assert.Equal(t, "750.00", st.Approval.Request.Amount, "the amount still covered, under the auto-approve limit")

	// Asked again: the same request and the same run, nothing new.
	out, err = testenv.Run(t, w.env, starter, "--review-of", id, "--reason", "again")
	require.NoError(t, err, out)
	assert.Contains(t, out, "was already requested")
	assert.Contains(t, out, "already exists")
	// A review is a person's decision: its outcome is appealed, not reviewed.
	out, err = testenv.Run(t, w.env, starter, "--review-of", review, "--reason", "why")
	require.Error(t, err)
	assert.Contains(t, out, "a person decided the claim")

	out, err = w.ctl("show", review)
	require.NoError(t, err, out)
	assert.Contains(t, out, "a person's review of "+id+"'s automated outcome (750.00 of 1500.00 paid), asked for by ada@example.com")

	out, err = w.ctl("decide", "approve", review, "--key", filepath.Join(w.keys, "supervisor-3.key"), "--note", "the invoice checks out")
	require.NoError(t, err, out)
	rr := w.result(review)
	require.Equal(t, workflows.StatusPaid, rr.Status, rr.Reason)
	assert.Equal(t, int64(75000), rr.PayoutMinor)

	for _, claimID := range []string{id, review} {
		n, total := w.transfers(claimID)
		assert.Equal(t, 1, n, "%s: one transfer", claimID)
		assert.Equal(t, int64(75000), total, claimID)
	}
	all := w.allTransfers()
	var sum int64
	for _, tr := range all {
		sum += tr.Amount
	}
	assert.Len(t, all, 2)
	assert.Equal(t, int64(150000), sum, "the original and its review pay what the policy covers, once")

	out, err = w.ctl("checkpoint")
	require.NoError(t, err, out)
	for _, claimID := range []string{id, review} {
		out, err = w.ctl("verify", claimID)
		require.NoError(t, err, out)
	}
	day := time.Now().UTC().Format(time.DateOnly)
	out, err = w.ctl("exam", "--from", day, "--to", day, "--json")
	require.NoError(t, err, out)
	reviews := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c struct {
			ClaimID  string `json:"claim_id"`
			ReviewOf string `json:"review_of"`
		}
		if json.Unmarshal([]byte(line), &c) == nil && c.ClaimID != "" {
			reviews[c.ClaimID] = c.ReviewOf
		}
	}
	assert.Equal(t, map[string]string{id: "", review: id}, reviews, out)
}
