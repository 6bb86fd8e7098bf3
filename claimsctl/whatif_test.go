package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/whatif"
	"github.com/stretchr/testify/require"
)

// The same command names the same what-if, so running it again after a
// kill resumes it; another candidate or selection names another.
func TestTheSameWhatIfCommandGetsTheSameID(t *testing.T) {
	input := func(limit string) whatif.Input {
		p := insurer.Defaults()
		p.AutoApproveLimit = limit
		return whatif.Input{Candidate: whatif.Candidate{Model: "openai/m", PromptVersion: "sha256:1", Policy: &p}, Concurrency: 4}
	}
	sel := selection{since: "720h", outcome: "paid", sample: 50}
	day := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	id := defaultWhatIfID(sel, input("1000"), 1, 2, day)
	assert.Equal(t, id, defaultWhatIfID(sel, input("1000"), 1, 2, day), "an equal policy read again (another pointer)")
	assert.NotEqual(t, id, defaultWhatIfID(sel, input("2000"), 1, 2, day), "another policy")
	assert.NotEqual(t, id, defaultWhatIfID(selection{since: "720h", outcome: "paid", sample: 60}, input("1000"), 1, 2, day), "another sample")
	assert.NotEqual(t, id, defaultWhatIfID(sel, input("1000"), 3, 2, day), "another price")
	assert.Regexp(t, `^whatif-[0-9a-f]{12}$`, id)
	assert.Equal(t, id, defaultWhatIfID(sel, input("1000"), 1, 2, day.Add(10*time.Hour)), "later the same day: the same window")
	assert.NotEqual(t, id, defaultWhatIfID(sel, input("1000"), 1, 2, day.Add(24*time.Hour)), "a relative window a day later is another window")
	fixed := selection{since: "2026-11-01T00:00:00Z"}
	assert.Equal(t, defaultWhatIfID(fixed, input("1000"), 1, 2, day), defaultWhatIfID(fixed, input("1000"), 1, 2, day.Add(48*time.Hour)), "a fixed window")
}

// Resuming trusts nothing its starter wrote: the run's own input must be
// what this command would give it. A run someone else started under the
// ID, with the memo copied and other claims or another candidate, is not
// resumed (the command's worker would read those claims into a history of
// theirs).
func TestAResumedWhatIfMustHaveBeenGivenThisSelection(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer st.Close()
	for _, f := range []store.ClaimFile{
		{ClaimID: "claim-a", RunID: "r1", Outcome: "paid"},
		{ClaimID: "claim-b", RunID: "r2", Outcome: "rejected"},
		{ClaimID: "claim-c", RunID: "r3", Outcome: "paid"},
	} {
		_, _, err := st.AppendClaimFile(ctx, f)
		require.NoError(t, err)
	}

	named := selection{claims: "claim-a,claim-c"}
	require.NoError(t, named.admits(ctx, st, []string{"claim-c", "claim-a"}))
	assert.ErrorContains(t, named.admits(ctx, st, []string{"claim-a", "claim-b"}), "not the 2 --claims names")

	window := selection{since: "720h", outcome: "paid"}
	require.NoError(t, window.admits(ctx, st, []string{"claim-a", "claim-c"}))
	require.NoError(t, window.admits(ctx, st, []string{"claim-a"}), "a window's claims as they stood then")
	assert.ErrorContains(t, window.admits(ctx, st, []string{"claim-a", "claim-b"}), `claim "claim-b", which the selection does not name`)
	assert.ErrorContains(t, window.admits(ctx, st, []string{"claim-zz"}), "does not name")
	sampled := selection{since: "720h", sample: 1}
	assert.ErrorContains(t, sampled.admits(ctx, st, []string{"claim-a", "claim-b"}), "more than the sample of 1")

	in := whatif.Input{Candidate: whatif.Candidate{Model: "gpt-x", PromptVersion: "p1"}, Concurrency: 4}
	require.NoError(t, sameWhatIf(in, in))
	other := in
	other.Candidate.Model = "attacker-model"
	assert.ErrorContains(t, sameWhatIf(other, in), "another candidate")
	faster := in
	faster.Concurrency = 64
	assert.ErrorContains(t, sameWhatIf(faster, in), "another pace")
}
