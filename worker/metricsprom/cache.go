package metricsprom

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/client"
)

// maxCached bounds what cached keeps: derived handlers and instruments
// together. A worker uses a few hundred (its task queues, its workflow and
// activity types, the SDK's and our metric names); past the bound, a
// handler is derived and an instrument looked up afresh, as without it.
const maxCached = 4096

// cached is the SDK's OpenTelemetry handler with each derived handler and
// each instrument built once. The SDK derives a handler (WithTags) for
// every task it polls, runs and answers, and the OpenTelemetry handler
// builds an attribute set for each (a sorted, hashed copy of its tags) and
// looks its instrument up by name on every Counter, Gauge and Timer: in a
// profile of the claims workload on 2026-12-07, 12 % of the bytes the
// worker allocated and 3 % of its CPU. The tag sets a worker uses are few,
// so the handler derived for a tag set from a given handler is kept and
// handed out again, with the instruments made from it.
//
// Unwrap gives the OpenTelemetry handler underneath, with its attributes
// (internal/metrics records histograms on its meter).
type cached struct {
	inner   client.MetricsHandler
	key     string // the tag sets that derived it, in order
	room    *atomic.Int64
	derived *sync.Map // key → *cached, shared by the whole tree

	counters, gauges, timers sync.Map // name → instrument
}

func newCached(h client.MetricsHandler) *cached {
	room := &atomic.Int64{}
	room.Store(maxCached)
	return &cached{inner: h, room: room, derived: &sync.Map{}}
}

// take claims room for one more kept entry.
func (c *cached) take() bool {
	if c.room.Add(-1) >= 0 {
		return true
	}
	c.room.Add(1)
	return false
}

// WithTags returns the handler these tags derive from c, kept.
func (c *cached) WithTags(tags map[string]string) client.MetricsHandler {
	if len(tags) == 0 {
		return c
	}
	// Each string length-prefixed, so that no two tag sets share a key.
	b := []byte(c.key)
	b = strconv.AppendInt(b, int64(len(tags)), 10)
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		for _, s := range [2]string{k, tags[k]} {
			b = strconv.AppendInt(append(b, ':'), int64(len(s)), 10)
			b = append(append(b, ':'), s...)
		}
	}
	key := string(b)
	if h, ok := c.derived.Load(key); ok {
		return h.(*cached)
	}
	h := &cached{inner: c.inner.WithTags(tags), key: key, room: c.room, derived: c.derived}
	if !c.take() {
		return h // not kept; its own instruments are not kept either
	}
	got, loaded := c.derived.LoadOrStore(key, h)
	if loaded {
		c.room.Add(1)
	}
	return got.(*cached)
}

// Counter returns the counter of that name, kept.
func (c *cached) Counter(name string) client.MetricsCounter {
	return instrument(c, &c.counters, name, c.inner.Counter)
}

// Gauge returns the gauge of that name, kept.
func (c *cached) Gauge(name string) client.MetricsGauge {
	return instrument(c, &c.gauges, name, c.inner.Gauge)
}

// Timer returns the timer of that name, kept.
func (c *cached) Timer(name string) client.MetricsTimer {
	return instrument(c, &c.timers, name, c.inner.Timer)
}

// Unwrap is the handler underneath (for temporalotel.ExtractMetricsHandler).
func (c *cached) Unwrap() client.MetricsHandler { return c.inner }

func instrument[T any](c *cached, kept *sync.Map, name string, build func(string) T) T {
	if i, ok := kept.Load(name); ok {
		return i.(T)
	}
	i := build(name)
	if !c.kept() || !c.take() {
		return i
	}
	got, loaded := kept.LoadOrStore(name, i)
	if loaded {
		c.room.Add(1)
	}
	return got.(T)
}

// kept says whether c itself is in the cache (a handler derived past the
// bound is not, and neither are its instruments: it is used and dropped).
func (c *cached) kept() bool {
	if c.key == "" {
		return true
	}
	h, ok := c.derived.Load(c.key)
	return ok && h == c
}
