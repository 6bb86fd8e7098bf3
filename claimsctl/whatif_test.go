package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/whatif"
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
