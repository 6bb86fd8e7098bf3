package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"
)

// speedJob is the machine's yardstick: a fixed, single-threaded piece of
// the kind of work a claim's path is made of (JSON out and in, small
// allocations, a map, a hash), timed best of seven. Machines of the same
// nominal size differ: on 2026-12-03 two sessions' machines, both "2
// cores, AMD EPYC", ran the same workloads 1.8–2.3× apart. The bench
// records the yardstick at its start, before its own processes run, and
// at its end, with them idle (machine_speed_start_ms, _end_ms), so that
// every figure carries the speed of the machine it was measured on, and
// a machine that slowed down midway shows it.
func speedJob() time.Duration {
	type line struct {
		Step   string            `json:"step"`
		Amount int64             `json:"amount_minor"`
		Notes  []string          `json:"notes"`
		Attrs  map[string]string `json:"attrs"`
	}
	best := time.Duration(1<<63 - 1)
	for range 7 {
		start := time.Now()
		var sum [32]byte
		for i := range 4000 {
			in := line{Step: "step" + strconv.Itoa(i%9), Amount: int64(i) * 137, Notes: []string{"a burst pipe", "the kitchen", "photos attached"},
				Attrs: map[string]string{"currency": "usd", "policy": "pol-" + strconv.Itoa(i), "stage": "adjuster"}}
			b, err := json.Marshal(in)
			if err != nil {
				panic(err)
			}
			var out line
			if err := json.Unmarshal(b, &out); err != nil {
				panic(err)
			}
			sum = sha256.Sum256(append(b, sum[:]...))
		}
		best = min(best, time.Since(start))
	}
	return best
}

// recordSpeed puts the yardstick's time into res under key and says it.
func recordSpeed(res *results, when string) {
	d := speedJob()
	res.Values["machine_speed_"+when+"_ms"] = float64(d.Microseconds()) / 1000
	fmt.Fprintf(os.Stderr, "bench: machine speed at the %s: %.1f ms for the yardstick job (less is faster)\n", when, float64(d.Microseconds())/1000)
}
