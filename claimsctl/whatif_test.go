package main

import (
	"testing"

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
	id := defaultWhatIfID(sel, input("1000"), 1, 2)
	assert.Equal(t, id, defaultWhatIfID(sel, input("1000"), 1, 2), "an equal policy read again (another pointer)")
	assert.NotEqual(t, id, defaultWhatIfID(sel, input("2000"), 1, 2), "another policy")
	assert.NotEqual(t, id, defaultWhatIfID(selection{since: "720h", outcome: "paid", sample: 60}, input("1000"), 1, 2), "another sample")
	assert.NotEqual(t, id, defaultWhatIfID(sel, input("1000"), 3, 2), "another price")
	assert.Regexp(t, `^whatif-[0-9a-f]{12}$`, id)
}
