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
	inner  client.MetricsHandler
	key    string // the tag sets that derived it, in order
	shared *kept

	counters, gauges, timers sync.Map // name → instrument
}

// kept is what the handlers derived from one root share.
type kept struct {
	room    atomic.Int64
	derived sync.Map // key → *cached
}

func newCached(h client.MetricsHandler) *cached {
	k := &kept{}
	k.room.Store(maxCached)
	return &cached{inner: h, shared: k}
}

// take claims room for one more kept entry.
func (k *kept) take() bool {
	if k.room.Add(-1) >= 0 {
		return true
	}
	k.room.Add(1)
	return false
}

// keep stores v under key in m unless another got there first, and
// returns what m holds; it gives back the room it took if so.
func (k *kept) keep(m *sync.Map, key string, v any) any {
	got, loaded := m.LoadOrStore(key, v)
	if loaded {
		k.room.Add(1)
	}
	return got
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
	if h, ok := c.shared.derived.Load(key); ok {
		return h.(*cached)
	}
	inner := c.inner.WithTags(tags)
	if !c.shared.take() {
		return inner // past the bound: the handler underneath, as without the cache
	}
	return c.shared.keep(&c.shared.derived, key, &cached{inner: inner, key: key, shared: c.shared}).(*cached)
}

// Counter returns the counter of that name, kept.
func (c *cached) Counter(name string) client.MetricsCounter {
	return instrument(c.shared, &c.counters, name, c.inner.Counter)
}

// Gauge returns the gauge of that name, kept.
func (c *cached) Gauge(name string) client.MetricsGauge {
	return instrument(c.shared, &c.gauges, name, c.inner.Gauge)
}

// Timer returns the timer of that name, kept.
func (c *cached) Timer(name string) client.MetricsTimer {
	return instrument(c.shared, &c.timers, name, c.inner.Timer)
}

// Unwrap is the handler underneath (for temporalotel.ExtractMetricsHandler).
func (c *cached) Unwrap() client.MetricsHandler { return c.inner }

func instrument[T any](k *kept, m *sync.Map, name string, build func(string) T) T {
	if i, ok := m.Load(name); ok {
		return i.(T)
	}
	i := build(name)
	if !k.take() {
		return i
	}
	return k.keep(m, name, i).(T)
}
