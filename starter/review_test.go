package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The window is the jurisdiction's review_window counted as every
// statutory clock is (to the local midnight ending its last day), or the
// policy's where no jurisdiction's rules applied.
func TestTheReviewWindow(t *testing.T) {
	decided := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC) // 10:00 in Los Angeles
	ends, err := reviewWindow("", 45*24*time.Hour)
	require.NoError(t, err)
	got, err := ends("US-CA", decided)
	require.NoError(t, err)
	assert.Equal(t, time.Date(2027, 1, 1, 8, 0, 0, 0, time.UTC), got.UTC(), "30 calendar days after 1 December, to Los Angeles' midnight")
	got, err = ends("", decided)
	require.NoError(t, err)
	assert.Equal(t, decided.Add(45*24*time.Hour), got, "no jurisdiction: the policy's window")
	_, err = ends("US-NY", decided)
	assert.ErrorContains(t, err, `"US-NY" has no rule set`)

	ends, err = reviewWindow("none", 45*24*time.Hour)
	require.NoError(t, err)
	_, err = ends("US-CA", decided)
	assert.ErrorContains(t, err, "JURISDICTION_RULES_FILE is none")
}

// --review-of starts one review and nothing else.
func TestReviewOfStandsAlone(t *testing.T) {
	for _, args := range [][]string{
		{"--review-of", "claim-0042", "--reason", "why", "claim.json"},
		{"--review-of", "claim-0042", "--reason", "why", "--claim-id", "claim-1"},
		{"--review-of", "claim-0042", "--reason", "why", "--register-only"},
	} {
		var stderr bytes.Buffer
		_, _, code := parseArgs(args, &stderr)
		assert.Equal(t, exitInvalid, code, "%v", args)
		assert.Contains(t, stderr.String(), "--review-of starts one review")
	}
	o, paths, code := parseArgs([]string{"--review-of", "claim-0042", "--reason", "why"}, new(bytes.Buffer))
	assert.Equal(t, exitOK, code)
	assert.Empty(t, paths)
	assert.Equal(t, review{of: "claim-0042", reason: "why"}, o.review)
}
