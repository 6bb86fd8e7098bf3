package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// What claimsctl stuck says of an outage: the count of every claim at
// work, or, when --max cut the read short, a count it calls a floor, with
// the cut named: a catastrophe week's 1,000 waiting are not read as 500.
func TestAnOutageCountCutByMaxSaysSo(t *testing.T) {
	now := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	o := &outage{Dependency: "stripe", Claims: 500, Since: now.Add(-16 * time.Minute)}
	assert.Equal(t, "500 waiting for stripe, the first since 2026-12-06T20:44:00Z (16m0s)", o.line(now, true, 500))
	assert.Equal(t, "at least 500 waiting for stripe, the first of them since 2026-12-06T20:44:00Z (16m0s): only the newest 500 claims at work were read (--max)",
		o.line(now, false, 500))
}
