package main

import (
	"fmt"
	"io"
	"slices"
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
	// Flags are the command line the run had.
	Flags []string `json:"flags"`
	// Notes are warnings and errors seen while measuring (the scaling
	// workers' logs), one example per message.
	Notes []string `json:"notes,omitempty"`
	// FloorShape is what the auto path's history recorded, the floor
	// workload's shape for it.
	FloorShape *FloorInput `json:"floor_shape,omitempty"`
	// Costs are one claim's events, bytes and billable actions, by path
	// (costs.go).
	Costs map[string]pathCost `json:"cost_per_claim,omitempty"`

	// What the workloads that ran were asked for, which the summary and
	// the tables follow: the scaling workload's servers and worker counts,
	// the kill workload's claims in flight, the surge's two levels.
	scaleServers     []string
	scaleWorkers     []int
	inflight         []int
	surgeBase, surge int
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

// setSamples keeps a series under key (replacing any).
func (r *results) setSamples(key string, xs []float64) {
	if r.Samples == nil {
		r.Samples = map[string][]float64{}
	}
	r.Samples[key] = xs
}

func (r *results) summarize() {
	if r.Values == nil {
		r.Values = map[string]float64{}
	}
	r.Summary, r.Ratios = map[string]stat{}, map[string]float64{}
	for k, xs := range r.Samples {
		if len(xs) == 0 {
			continue // a series nothing was measured into has no summary
		}
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		r.Summary[k] = stat{N: len(s), Min: s[0], Median: percentile(s, 50), P99: percentile(s, 99), Max: s[len(s)-1]}
	}
	med := func(k string) float64 { return r.Summary[k].Median }
	ratio := func(name, a, b string) {
		if med(a) > 0 && med(b) > 0 {
			r.Ratios[name] = med(a) / med(b)
		}
	}
	ratio("claims_vs_baseline", "claims_per_s", "baseline_per_s")
	ratio("claims_vs_ceiling", "claims_per_s", "ceiling_per_s")
	ratio("baseline_vs_ceiling", "baseline_per_s", "ceiling_per_s")
	for _, srv := range r.scaleServers {
		first := scaleKey(srv, r.scaleWorkers[0])
		for _, n := range r.scaleWorkers {
			k := scaleKey(srv, n)
			if med(k) == 0 {
				continue
			}
			if med("baseline_per_s") > 0 {
				r.Ratios[strings.TrimSuffix(k, "_per_s")+"_vs_baseline"] = med(k) / med("baseline_per_s")
			}
			if med("claims_per_s") > 0 {
				r.Ratios[strings.TrimSuffix(k, "_per_s")+"_vs_claims"] = med(k) / med("claims_per_s")
			}
			if k != first && med(first) > 0 {
				r.Ratios[strings.TrimSuffix(k, "_per_s")+"_vs_"+strings.TrimPrefix(strings.TrimSuffix(first, "_per_s"), "scaling_"+srv+"_")] = med(k) / med(first)
			}
		}
	}
}

// scaleKey is the sample key of claims/s with n workers against srv.
func scaleKey(srv string, n int) string { return fmt.Sprintf("scaling_%s_%dw_per_s", srv, n) }

var scaleServerLabels = map[string]string{"dev": "dev server", "cluster": "cluster"}

// rows are printed in this order, with the target each is held to.
var rows = []struct{ key, label, unit, target string }{
	{"ceiling_per_s", "ceiling: empty workflow", "/s", ""},
	{"baseline_per_s", "baseline: 9 no-op regular activities", "/s", ""},
	{"claims_per_s", "ClaimWorkflow, auto-approve path", "/s", "≥ 2× baseline, ≥ 0.4× ceiling"},
	{"history_events", "history events per auto-approved claim", "", "≤ 30"},
	{"history_bytes", "history bytes per auto-approved claim", "B", "≤ 12288 (12 KiB)"},
	{"approve_to_transfer_ms", "approve signal → transfer committed", "ms", "p99 < 300"},
	{"priority_approve_to_transfer_ms", "surge: approve→transfer, defaults", "ms", "p99 < 1000"},
	{"priority_catastrophe_approve_to_transfer_ms", "surge: approve→transfer, catastrophe week", "ms", "p99 < 1000"},
}

func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "durableclaims bench, %s, %s\n", r.Date, r.Machine)
	if a, ok := r.Values["machine_speed_start_ms"]; ok {
		fmt.Fprintf(w, "the machine's yardstick job (less is faster): %.1f ms at the start, %.1f ms at the end\n", a, r.Values["machine_speed_end_ms"])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %-48s | %5s | %9s | %9s | %9s | %9s | %-30s |\n", "measure", "n", "min", "median", "p99", "max", "target")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 50), strings.Repeat("-", 7), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 11), strings.Repeat("-", 32))
	for _, row := range rows {
		s, ok := r.Summary[row.key]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %-48s | %5d | %9.1f | %9.1f | %9.1f | %9.1f | %-30s |\n", row.label+" ("+strings.TrimSpace(row.unit)+")", s.N, s.Min, s.Median, s.P99, s.Max, row.target)
	}
	for _, n := range r.inflight {
		key := fmt.Sprintf("kill_recovery_ms_%d_inflight", n)
		if s, ok := r.Summary[key]; ok {
			fmt.Fprintf(w, "| %-48s | %5d | %9.1f | %9.1f | %9.1f | %9.1f | %-30s |\n",
				fmt.Sprintf("SIGKILL, %d in flight: interrupted step redone (ms)", n), s.N, s.Min, s.Median, s.P99, s.Max, "p99 ≤ 15000")
		}
	}
	for _, srv := range r.scaleServers {
		for _, n := range r.scaleWorkers {
			if s, ok := r.Summary[scaleKey(srv, n)]; ok {
				fmt.Fprintf(w, "| %-48s | %5d | %9.1f | %9.1f | %9.1f | %9.1f | %-30s |\n",
					fmt.Sprintf("scaling, %s: %d worker(s), PostgreSQL (/s)", scaleServerLabels[srv], n), s.N, s.Min, s.Median, s.P99, s.Max, "")
			}
		}
	}
	fmt.Fprintln(w)
	for _, k := range []string{"claims_vs_baseline", "claims_vs_ceiling", "baseline_vs_ceiling"} {
		if v, ok := r.Ratios[k]; ok {
			fmt.Fprintf(w, "%-22s %.2f× (medians)\n", k, v)
		}
	}
	r.printCPU(w)
	r.printAnatomy(w)
	r.printFloor(w)
	r.printWhere(w)
	if v, ok := r.Values["surge_inbox_p95_ratio"]; ok {
		lo, hi := r.surgeBase, r.surge
		rested := "" // results written before the worker was read at rest
		if _, ok := r.Values["surge_rss_ratio_rested"]; ok {
			rested = fmt.Sprintf(", %.1f → %.1f MiB after %.0f s at rest (%+.1f%%)", r.Values["surge_rss_idle_mib_rested"],
				r.Values["surge_rss_parked_mib_rested"], r.Values["surge_rest_s"], (r.Values["surge_rss_ratio_rested"]-1)*100)
		}
		fmt.Fprintf(w, "surge, %d against %d claims waiting: inbox first page p95 %.0f ms against %.0f ms (×%.2f; target < 300 ms, ≤ ×1.5); "+
			"claimsctl list --status waiting p95 %.0f ms against %.0f ms (×%.2f); worker RSS %.1f → %.1f MiB 5 s after the work (%+.1f%%)%s (target ≤ +15%%)\n",
			hi, lo, r.Values[fmt.Sprintf("surge_%d_inbox_p95_ms", hi)], r.Values[fmt.Sprintf("surge_%d_inbox_p95_ms", lo)], v,
			r.Values[fmt.Sprintf("surge_%d_list_p95_ms", hi)], r.Values[fmt.Sprintf("surge_%d_list_p95_ms", lo)], r.Values["surge_list_p95_ratio"],
			r.Values["surge_rss_idle_mib"], r.Values["surge_rss_parked_mib"], (r.Values["surge_rss_ratio"]-1)*100, rested)
	}
	if v, ok := r.Values["rss_parked_ratio"]; ok {
		fmt.Fprintf(w, "worker RSS: %.1f MiB idle, %.1f MiB with %.0f claims parked (%+.1f%%; target ≤ +15%%)\n",
			r.Values["rss_idle_mib"], r.Values["rss_parked_mib"], r.Values["parked_claims"], (v-1)*100)
		fmt.Fprintf(w, "worker goroutines: %.0f idle, %.0f with claims parked (target: flat)\n", r.Values["goroutines_idle"], r.Values["goroutines_parked"])
	}
	if v, ok := r.Values["tracing_cost_ratio"]; ok {
		fmt.Fprintf(w, "tracing to Jaeger: the stack's CPU a claim %+.1f%% at the median of %d repetitions (target ≤ +10%%); over all of them %.1f ms off, %.1f ms on (%+.1f%%); the machine's busy CPU %+.1f%%\n",
			(r.Values["tracing_cost_ratio_median"]-1)*100, len(r.Samples["tracing_cost_ratio_pairs"]),
			r.Values["tracing_off_cpu_ms"], r.Values["tracing_on_cpu_ms"], (v-1)*100, (r.Values["tracing_machine_cost_ratio"]-1)*100)
	}
	for _, n := range r.inflight {
		if v, ok := r.Values[fmt.Sprintf("kill_all_done_s_%d_inflight", n)]; ok {
			fmt.Fprintf(w, "kill with %d in flight: all %d done %.1f s after the SIGKILL\n", n, n, v)
		}
	}
	r.printLatency(w)
	r.printCosts(w)
	for _, srv := range r.scaleServers {
		r.printScaling(w, srv)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// printScaling prints claims/s per worker count beside the baseline, the
// CPU each part of the system used while they ran, the worker profile, and
// what the numbers say the limit is.
func (r *results) printScaling(w io.Writer, srv string) {
	ws := r.scaleWorkers
	if _, ok := r.Summary[scaleKey(srv, ws[0])]; !ok {
		return
	}
	cpus := r.Values["cpus"]
	v := func(n int, name string) float64 {
		return r.Values[fmt.Sprintf("scaling_%s_%dw_cpu_%s_cores", srv, n, name)]
	}
	fmt.Fprintf(w, "\nscaling against the %s, claims store on PostgreSQL (median claims/s; CPU in cores of %.0f while the measured runs ran):\n\n", scaleServerLabels[srv], cpus)
	fmt.Fprintf(w, "| workers | claims/s | × baseline | × %d worker(s) | workers' CPU | Temporal server | PostgreSQL: claims | PostgreSQL: Temporal | bench | irq, softirq | other processes | machine busy | steal | CPU per claim: all / Temporal / workers / claims store | warnings, errors logged |\n", ws[0])
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	base := r.Summary["baseline_per_s"].Median
	first := r.Summary[scaleKey(srv, ws[0])].Median
	for _, n := range ws {
		med := r.Summary[scaleKey(srv, n)].Median
		xb := "—"
		if base > 0 {
			xb = fmt.Sprintf("%.2f×", med/base)
		}
		pgT := "—"
		if srv == "cluster" {
			pgT = fmt.Sprintf("%.2f", v(n, "pg_temporal"))
		}
		// The machine's ticks and the processes' are counted apart: a
		// small negative remainder is rounding.
		other := max(0, v(n, "machine_busy")-v(n, "machine_irq")-v(n, "workers")-v(n, "server")-v(n, "pg_claims")-v(n, "pg_temporal")-v(n, "bench"))
		ms := func(name string) float64 {
			return r.Values[fmt.Sprintf("scaling_%s_%dw_cpu_%s_ms_per_claim", srv, n, name)]
		}
		fmt.Fprintf(w, "| %d | %.1f | %s | %.2f× | %.2f (%.2f each) | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %.2f of %.0f (%.0f %%) | %.2f | %.0f / %.0f / %.0f / %.0f ms | %.0f |\n",
			n, med, xb, med/first, v(n, "workers"), v(n, "workers")/float64(n), v(n, "server"), v(n, "pg_claims"), pgT,
			v(n, "bench"), v(n, "machine_irq"), other, v(n, "machine_busy"), cpus, 100*v(n, "machine_busy")/cpus, v(n, "machine_steal"),
			ms("machine_busy"), ms("server")+ms("pg_temporal"), ms("workers"), ms("pg_claims"),
			r.Values[fmt.Sprintf("scaling_%s_%dw_log_problems", srv, n)])
	}
	for _, n := range ws {
		prefix := fmt.Sprintf("scaling_%s_%dw_cpu_other_process_", srv, n)
		var keys []string
		for k := range r.Values {
			if strings.HasPrefix(k, prefix) {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return r.Values[keys[i]] > r.Values[keys[j]] })
		var names []string
		for _, k := range keys {
			names = append(names, fmt.Sprintf("%s %.2f", strings.TrimSuffix(strings.TrimPrefix(k, prefix), "_cores"), r.Values[k]))
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "other processes at %d worker(s), busiest (cores): %s\n", n, strings.Join(names, ", "))
		}
	}
	p := "scaling_" + srv + "_profile_"
	if secs, ok := r.Values[p+"seconds"]; ok {
		fmt.Fprintf(w, "\nthe %d workers' CPU profile (%.0f s, merged): %.2f cores; %s\n", slices.Max(ws), secs, r.Values[p+"worker_cores"], r.profileShares(p, profileCategories))
	}
	sp := "scaling_" + srv + "_server_profile_"
	if cores, ok := r.Values[sp+"cores"]; ok {
		fmt.Fprintf(w, "the Temporal server's CPU profile (same window): %.2f cores; %s\n", cores, r.profileShares(sp, serverProfileCategories))
	}
	// The verdict, from the largest worker count.
	n := slices.Max(ws)
	busy := v(n, "machine_busy") + v(n, "machine_steal")
	parts := []struct {
		name  string
		cores float64
	}{{"the Temporal server", v(n, "server")}, {"PostgreSQL (claims store)", v(n, "pg_claims")},
		{"PostgreSQL (Temporal's)", v(n, "pg_temporal")}, {fmt.Sprintf("the %d workers", n), v(n, "workers")},
		{"the bench (client, stripesim)", v(n, "bench")}}
	sort.Slice(parts, func(i, j int) bool { return parts[i].cores > parts[j].cores })
	verdict := fmt.Sprintf("not CPU-bound: the cores were %.0f %% busy, so something serialises first", 100*busy/cpus)
	if srv == "dev" {
		// temporalcli devserver: NumHistoryShards = 1; the server's SQLite
		// plugin: SetMaxOpenConns(1).
		verdict += " (the dev server keeps every workflow on one history shard and writes through one SQLite connection)"
	}
	if busy >= 0.85*cpus {
		verdict = fmt.Sprintf("CPU-bound: the %.0f cores were %.0f %% busy (steal included), so more worker processes only share the same cores", cpus, 100*busy/cpus)
	}
	fmt.Fprintf(w, "limit at %d workers: %s; largest shares: %s %.2f cores, %s %.2f, %s %.2f", n, verdict,
		parts[0].name, parts[0].cores, parts[1].name, parts[1].cores, parts[2].name, parts[2].cores)
	others := v(n, "machine_busy") - v(n, "machine_irq") - v(n, "workers") - v(n, "server") - v(n, "pg_claims") - v(n, "pg_temporal") - v(n, "bench")
	if others >= 0.1 {
		fmt.Fprintf(w, "; processes outside the bench took %.2f cores (a shared machine)", others)
	}
	fmt.Fprintln(w)
}

// printLatency prints the real-model workload: throughput and completion
// time against the latency floor, and the worker's slots at their tightest.
func (r *results) printLatency(w io.Writer) {
	c, ok := r.Summary["latency_completion_ms"]
	if !ok {
		return
	}
	f, o := r.Summary["latency_floor_ms"], r.Summary["latency_overhead_ms"]
	fmt.Fprintf(w, "\nreal model latency: modelsim answers each call in %.1f–%.1f s, %.0f claims in flight (auto-approve path, two triage turns and the assessment):\n\n",
		r.Values["latency_model_min_ms"]/1000, r.Values["latency_model_max_ms"]/1000, r.Values["latency_concurrency"])
	fmt.Fprintf(w, "| measure | p50 | p99 | target |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| claim completion, start to paid (s) | %.2f | %.2f | |\n", c.Median/1000, c.P99/1000)
	fmt.Fprintf(w, "| latency floor: the model's own latencies on the path (s) | %.2f | %.2f | |\n", f.Median/1000, f.P99/1000)
	fmt.Fprintf(w, "| completion minus floor: durable execution (s) | %.2f | %.2f | p50 ≤ ×1.1, p99 ≤ ×1.25 the floor's |\n", o.Median/1000, o.P99/1000)
	fmt.Fprintf(w, "\nclaims/s %.1f while every slot was busy (%.0f s window; %.1f over the whole run, ramp and drain included); the floor allows %.1f/s at this concurrency (in flight / mean floor); target ≥ 90 %%: %.0f %%\n",
		r.Values["latency_claims_per_s"], r.Values["latency_steady_window_s"], r.Values["latency_claims_per_s_whole_run"],
		r.Values["latency_floor_bound_per_s"], 100*r.Values["latency_claims_per_s"]/r.Values["latency_floor_bound_per_s"])
	if _, ok := r.Values["latency_part_model_ms"]; ok {
		var ps []string
		for _, p := range parts {
			ps = append(ps, fmt.Sprintf("%s %.0f", strings.ReplaceAll(p, "_", " "), r.Values["latency_part_"+p+"_ms"]))
		}
		fmt.Fprintf(w, "a claim's time from its history, mean ms: %s\n", strings.Join(ps, ", "))
	}
	if all, ok := r.Values["latency_cpu_machine_busy_ms_per_claim"]; ok {
		fmt.Fprintf(w, "CPU per claim (ms): server %.1f, worker %.1f, bench (client, modelsim, stripesim) %.1f, machine %.1f; machine busy %.2f of %.0f cores: at this cost the floor's rate needs %.1f cores\n",
			r.Values["latency_cpu_server_ms_per_claim"], r.Values["latency_cpu_worker_ms_per_claim"], r.Values["latency_cpu_bench_ms_per_claim"], all,
			r.Values["latency_cpu_machine_busy_cores"], r.Values["cpus"], all/1000*r.Values["latency_floor_bound_per_s"])
	}
	var parts []string
	for _, kind := range []string{"WorkflowWorker", "ActivityWorker", "LocalActivityWorker"} {
		if avail, ok := r.Values["latency_slots_min_available_"+kind]; ok {
			parts = append(parts, fmt.Sprintf("%s: at most %.0f used, at least %.0f free", kind, r.Values["latency_slots_max_used_"+kind], avail))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "worker slots during the run (target: never 0 free): %s\n", strings.Join(parts, "; "))
	}
}

// printCPU prints what one workflow of each throughput row cost each
// process (CPU time from /proc over the measured repetitions): where the
// claim path's time goes, beside the yardsticks'.
func (r *results) printCPU(w io.Writer) {
	var lines []string
	for _, row := range []struct{ key, label string }{{"ceiling", "ceiling"}, {"baseline", "baseline"}, {"claims", "claims"}} {
		server, ok := r.Values[row.key+"_cpu_server_ms_per_claim"]
		if !ok {
			continue
		}
		lines = append(lines, fmt.Sprintf("| %s | %.1f | %.1f | %.1f | %.2f / %.2f / %.2f |", row.label, server,
			r.Values[row.key+"_cpu_worker_ms_per_claim"], r.Values[row.key+"_cpu_bench_ms_per_claim"],
			r.Values[row.key+"_cpu_server_cores"], r.Values[row.key+"_cpu_worker_cores"], r.Values[row.key+"_cpu_bench_cores"]))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCPU per workflow (ms, from /proc over the measured repetitions) and cores while it ran:\n\n")
	fmt.Fprintln(w, "| workload | Temporal server | worker | bench (client, stripesim) | cores: server / worker / bench |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if secs, ok := r.Values["claims_profile_seconds"]; ok {
		fmt.Fprintf(w, "\nthe claims worker's CPU profile (%.0f s of the last repetition, claims-worker-0.pprof): %.2f cores; %s\n",
			secs, r.Values["claims_profile_worker_cores"], r.profileShares("claims_profile_", profileCategories))
	}
}

// profileShares lists a profile's categories of at least half a percent,
// from the values finish recorded under prefix.
func (r *results) profileShares(prefix string, cats []profileCategory) string {
	var parts []string
	for _, c := range cats {
		if pct := r.Values[prefix+c.key+"_pct"]; pct >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.0f %%", c.label, pct))
		}
	}
	return strings.Join(parts, ", ")
}

// printAnatomy prints what each ingredient of a claim added to the
// server's and the worker's CPU per workflow (the anatomy workload).
func (r *results) printAnatomy(w io.Writer) {
	if _, ok := r.Values["anatomy_empty_cpu_server_ms_per_claim"]; !ok {
		return
	}
	fmt.Fprintf(w, "\nanatomy of a claim's cost (the yardsticks' worker; CPU per workflow, ms):\n\n")
	fmt.Fprintln(w, "| workflow | Temporal server | added | worker | workflows/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	prev := 0.0
	for _, s := range anatomySteps {
		k := "anatomy_" + s.key
		server, ok := r.Values[k+"_cpu_server_ms_per_claim"]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %s | %.1f | %+.1f | %.1f | %.1f |\n", s.name, server, server-prev, r.Values[k+"_cpu_worker_ms_per_claim"], r.Summary[k+"_per_s"].Median)
		prev = server
	}
}
