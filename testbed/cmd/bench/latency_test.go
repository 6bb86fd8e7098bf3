package main

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A closed loop of c slots whose claims each take exactly d runs at c/d
// claims a second: the steady window says so, where n ÷ wall (ramp and
// drain included) says less.
func TestSteadyRateCountsOnlyTheBusyWindow(t *testing.T) {
	const c, n = 10, 100
	d := 2 * time.Second
	t0 := time.Unix(1_800_000_000, 0)
	runs := map[string]claimSpan{}
	free := make([]time.Time, c)
	for i := range c {
		free[i] = t0.Add(d * time.Duration(i) / c) // admitted over one claim time
	}
	var last time.Time
	for i := range n {
		s := i % c
		start := free[s]
		end := start.Add(d)
		runs[fmt.Sprint(i)] = claimSpan{start, end}
		free[s] = end
		if end.After(last) {
			last = end
		}
	}
	rate, window := steadyRate(runs, 2*c)
	require.Positive(t, window)
	assert.InDelta(t, float64(c)/d.Seconds(), rate, 0.3)
	whole := float64(n) / last.Sub(t0).Seconds()
	assert.Less(t, whole, rate)

	_, window = steadyRate(runs, n)
	assert.Zero(t, window, "no window when every claim starts before the count")
}

// Claim times that vary: the steady rate is close to c / mean time
// (Little's law), within a few per cent.
func TestSteadyRateMatchesLittlesLaw(t *testing.T) {
	const c, n = 50, 1000
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_800_000_000, 0)
	runs := map[string]claimSpan{}
	free := make([]time.Time, c)
	for i := range c {
		free[i] = t0.Add(4500 * time.Millisecond * time.Duration(i) / c)
	}
	var sum time.Duration
	for i := range n {
		s := 0
		for j := range free {
			if free[j].Before(free[s]) {
				s = j
			}
		}
		d := time.Duration(3000+rng.IntN(3000)) * time.Millisecond
		sum += d
		runs[fmt.Sprint(i)] = claimSpan{free[s], free[s].Add(d)}
		free[s] = free[s].Add(d)
	}
	rate, _ := steadyRate(runs, 2*c)
	little := float64(c) / (sum / n).Seconds()
	assert.InEpsilon(t, little, rate, 0.04)
}
