package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// results holds every sample and the summary printed and written as JSON.
type results struct {
	Date    string               `json:"date"`
	Machine string               `json:"machine"`
	Options options              `json:"options"`
	Samples map[string][]float64 `json:"samples"`
	Values  map[string]float64   `json:"values"`
	Summary map[string]stat      `json:"summary"`
	Ratios  map[string]float64   `json:"ratios"`
}

type stat struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

func (r *results) add(key string, v float64) {
	if r.Samples == nil {
		r.Samples = map[string][]float64{}
	}
	r.Samples[key] = append(r.Samples[key], v)
}

func (r *results) summarize() {
	if r.Values == nil {
		r.Values = map[string]float64{}
	}
	r.Summary, r.Ratios = map[string]stat{}, map[string]float64{}
	for k, xs := range r.Samples {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		r.Summary[k] = stat{N: len(s), Min: s[0], Median: percentile(s, 50), P99: percentile(s, 99), Max: s[len(s)-1]}
	}
	med := func(k string) float64 { return r.Summary[k].Median }
	if med("baseline_per_s") > 0 {
		r.Ratios["claims_vs_baseline"] = med("claims_per_s") / med("baseline_per_s")
	}
	if med("ceiling_per_s") > 0 {
		r.Ratios["claims_vs_ceiling"] = med("claims_per_s") / med("ceiling_per_s")
		r.Ratios["baseline_vs_ceiling"] = med("baseline_per_s") / med("ceiling_per_s")
	}
}

// rows are printed in this order, with the target each is held to.
var rows = []struct{ key, label, unit, target string }{
	{"ceiling_per_s", "ceiling: empty workflow", "/s", ""},
	{"baseline_per_s", "baseline: 9 no-op regular activities", "/s", ""},
	{"claims_per_s", "ClaimWorkflow, auto-approve path", "/s", "≥ 2× baseline, ≥ 0.4× ceiling"},
	{"history_events", "history events per auto-approved claim", "", "≤ 40"},
	{"history_bytes", "history bytes per auto-approved claim", "B", "≤ 16384"},
	{"approve_to_transfer_ms", "approve signal → transfer committed", "ms", "p99 < 300"},
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "durableclaims bench, %s, %s\n\n", r.Date, r.Machine)
	fmt.Fprintf(w, "| %-48s | %5s | %9s | %9s | %9s | %9s | %-30s |\n", "measure", "n", "min", "median", "p99", "max", "target")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 50), strings.Repeat("-", 7), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 32))
	for _, row := range rows {
		s, ok := r.Summary[row.key]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %-48s | %5d | %9.1f | %9.1f | %9.1f | %9.1f | %-30s |\n", row.label+" ("+strings.TrimSpace(row.unit)+")", s.N, s.Min, s.Median, s.P99, s.Max, row.target)
	}
	for _, n := range r.Options.inflight {
		key := fmt.Sprintf("kill_recovery_ms_%d_inflight", n)
		if s, ok := r.Summary[key]; ok {
			fmt.Fprintf(w, "| %-48s | %5d | %9.1f | %9.1f | %9.1f | %9.1f | %-30s |\n",
				fmt.Sprintf("SIGKILL, %d in flight: interrupted step redone (ms)", n), s.N, s.Min, s.Median, s.P99, s.Max, "p99 ≤ 15000")
		}
	}
	fmt.Fprintln(w)
	for _, k := range []string{"claims_vs_baseline", "claims_vs_ceiling", "baseline_vs_ceiling"} {
		if v, ok := r.Ratios[k]; ok {
			fmt.Fprintf(w, "%-22s %.2f× (medians)\n", k, v)
		}
	}
	if v, ok := r.Values["rss_parked_ratio"]; ok {
		fmt.Fprintf(w, "worker RSS: %.1f MiB idle, %.1f MiB with %.0f claims parked (%+.1f%%; target ≤ +15%%)\n",
			r.Values["rss_idle_mib"], r.Values["rss_parked_mib"], r.Values["parked_claims"], (v-1)*100)
		fmt.Fprintf(w, "worker goroutines: %.0f idle, %.0f with claims parked (target: flat)\n", r.Values["goroutines_idle"], r.Values["goroutines_parked"])
	}
	for _, n := range r.Options.inflight {
		if v, ok := r.Values[fmt.Sprintf("kill_all_done_s_%d_inflight", n)]; ok {
			fmt.Fprintf(w, "kill with %d in flight: all %d done %.1f s after the SIGKILL\n", n, n, v)
		}
	}
}
