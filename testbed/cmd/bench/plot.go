package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The bench draws its results as SVG next to its JSON, from the JSON alone
// (`bench -plot var/bench/latest.json` redraws an old run), so the pictures
// always show exactly what the file holds:
//
//	<base>-throughput.svg  workflows/s per workload and per worker count (median,
//	                       min–max over the repetitions), the baseline marked
//	<base>-latency.svg     approve signal → transfer committed, as a CDF
//	<base>-recovery.svg    after the SIGKILL, per in-flight size: when each
//	                       interrupted step was done again, and all claims done
//	<base>-cost.svg        history events and billable actions per claim, by path
//	<base>.svg             the panels above that have data, one under another
//
// A workload that did not run has no panel, and its file from an older run
// is removed, so no picture outlives its numbers.

// panelFiles are the panels' file suffixes, in the order they are stacked.
var panelFiles = []string{"throughput", "latency", "model", "recovery", "cost", "surge", "peers"}

func init() {
	// Sans, for small labels; the SVG names it with fallbacks (sansFamily).
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// redraw draws the results in jsonPath next to it and returns the files
// written.
func redraw(jsonPath string) ([]string, error) {
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", jsonPath, err)
	}
	return drawResults(&r, strings.TrimSuffix(jsonPath, ".json"))
}

// drawResults writes base-<panel>.svg for each panel with data, and
// base.svg with all of them.
func drawResults(r *results, base string) ([]string, error) {
	sub := runLabel(r)
	builders := map[string]func(*results, string) (*plot.Plot, error){
		"throughput": throughputPlot, "latency": latencyPlot, "model": modelLatencyPlot, "recovery": recoveryPlot, "cost": costPlot,
		"surge": surgePlot, "peers": peersPlot,
	}
	var plots []*plot.Plot
	var files []string
	for _, name := range panelFiles {
		file := base + "-" + name + ".svg"
		p, err := builders[name](r, sub)
		if err != nil {
			return files, fmt.Errorf("%s: %w", name, err)
		}
		if p == nil {
			if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return files, err
			}
			continue
		}
		if err := writeSVG(file, 9*vg.Inch, 4.2*vg.Inch, []*plot.Plot{p}); err != nil {
			return files, err
		}
		plots, files = append(plots, p), append(files, file)
	}
	if len(plots) == 0 {
		return nil, errors.New("no workload in these results has samples to draw")
	}
	if err := writeSVG(base+".svg", 9*vg.Inch, vg.Length(len(plots))*4.2*vg.Inch, plots); err != nil {
		return files, err
	}
	return append(files, base+".svg"), nil
}

// writeSVG draws plots one under another into an SVG file.
func writeSVG(file string, w, h vg.Length, plots []*plot.Plot) error {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: 4, PadBottom: 4, PadLeft: 4, PadRight: 8, PadY: 18}
	for i, cs := range plot.Align(rows, tiles, dc) {
		plots[i].Draw(cs[0])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	return os.WriteFile(file, sansFamily(buf.Bytes()), 0o644)
}

// sansFamily gives the font family fallbacks: a browser without Liberation
// Sans uses Arial (same metrics) or any sans-serif, not its default serif.
func sansFamily(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// runLabel is the run's date and its flags that change what was measured.
func runLabel(r *results) string {
	date := r.Date
	if t, err := time.Parse(time.RFC3339, r.Date); err == nil {
		date = t.UTC().Format("2006-01-02 15:04 UTC")
	}
	var flags []string
	for i := 0; i < len(r.Flags); i++ {
		f := r.Flags[i]
		name := strings.TrimLeft(strings.SplitN(f, "=", 2)[0], "-")
		if name == "worker" || name == "temporal" || name == "json" { // paths, not settings
			if !strings.Contains(f, "=") {
				i++
			}
			continue
		}
		flags = append(flags, f)
	}
	cmd := "bin/bench (default flags)"
	if len(flags) > 0 {
		cmd = "bin/bench " + strings.Join(flags, " ")
	}
	return fmt.Sprintf("run of %s, %s; %s", date, cmd, r.Machine)
}

// five is a sample's order statistics, as results.summarize computes them.
type five struct{ n, min, median, p99, max float64 }

func stats(xs []float64) five {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return five{float64(len(s)), s[0], percentile(s, 50), percentile(s, 99), s[len(s)-1]}
}

var (
	grey   = color.RGBA{R: 150, G: 150, B: 150, A: 255}
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	purple = color.RGBA{R: 148, G: 103, B: 189, A: 255}
)

func newPlot(title, sub string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title + "\n" + sub
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// hline is a dashed horizontal line from x0 to x1 at y, in the legend.
func hline(p *plot.Plot, x0, x1, y float64, c color.Color, dashes []vg.Length, legend string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(legend, l)
	return nil
}

// valueLabels writes texts above points.
func valueLabels(p *plot.Plot, xys plotter.XYs, texts []string) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].Font.Size = vg.Points(8)
	}
	l.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(l)
	return nil
}

// spread is the min–max bars of medians.
type spread struct {
	plotter.XYs
	lo, hi []float64
}

func (s spread) YError(i int) (float64, float64) { return s.XYs[i].Y - s.lo[i], s.hi[i] - s.XYs[i].Y }

var (
	scaleSample = regexp.MustCompile(`^scaling_([a-z]+)_(\d+)w_per_s$`)
	killSample  = regexp.MustCompile(`^kill_recovery_ms_(\d+)_inflight$`)
)

// throughputPlot: median workflows/s per workload, min–max bars, the
// baseline and the 2× target as lines.
func throughputPlot(r *results, sub string) (*plot.Plot, error) {
	type bar struct {
		label string
		xs    []float64
		color color.Color
	}
	var bars []bar
	for _, b := range []bar{
		{"ceiling\n(empty)", r.Samples["ceiling_per_s"], grey},
		{"baseline\n(9 no-op)", r.Samples["baseline_per_s"], grey},
		{"claims\n(SQLite)", r.Samples["claims_per_s"], blue},
	} {
		if len(b.xs) > 0 {
			bars = append(bars, b)
		}
	}
	// Scaling rows, dev server first, by worker count.
	type scale struct {
		srv string
		n   int
		key string
	}
	var scales []scale
	for k := range r.Samples {
		if m := scaleSample.FindStringSubmatch(k); m != nil && len(r.Samples[k]) > 0 {
			n, _ := strconv.Atoi(m[2])
			scales = append(scales, scale{m[1], n, k})
		}
	}
	order := map[string]int{"dev": 0, "cluster": 1}
	sort.Slice(scales, func(i, j int) bool {
		a, b := scales[i], scales[j]
		if a.srv != b.srv {
			if order[a.srv] != order[b.srv] {
				return order[a.srv] < order[b.srv]
			}
			return a.srv < b.srv
		}
		return a.n < b.n
	})
	for _, s := range scales {
		c, label := purple, s.srv
		switch s.srv {
		case "dev":
			c, label = green, "dev server"
		case "cluster":
			c, label = orange, "cluster"
		}
		workers := "workers"
		if s.n == 1 {
			workers = "worker"
		}
		bars = append(bars, bar{fmt.Sprintf("%s\n%d %s", label, s.n, workers), r.Samples[s.key], c})
	}
	if len(bars) == 0 {
		return nil, nil
	}
	p := newPlot("Throughput, 100 workflows in flight (bar: median; whisker: min–max of the repetitions)", sub)
	p.Y.Label.Text = "workflows completed / s"
	if len(scales) > 0 {
		p.X.Label.Text = "claims: one worker, SQLite store; dev server and cluster: the scaling workload, claims store on PostgreSQL"
		p.X.Label.TextStyle.Font.Size = vg.Points(9)
	}
	p.Y.Min = 0
	var names []string
	var mids plotter.XYs
	var lo, hi []float64
	var texts []string
	for i, b := range bars {
		s := stats(b.xs)
		bc, err := plotter.NewBarChart(plotter.Values{s.median}, vg.Points(34))
		if err != nil {
			return nil, err
		}
		bc.XMin, bc.Color, bc.LineStyle.Width = float64(i), b.color, 0
		p.Add(bc)
		names = append(names, b.label)
		mids = append(mids, plotter.XY{X: float64(i), Y: s.median})
		lo, hi = append(lo, s.min), append(hi, s.max)
		texts = append(texts, fmt.Sprintf("%.1f", s.median))
	}
	eb, err := plotter.NewYErrorBars(spread{mids, lo, hi})
	if err != nil {
		return nil, err
	}
	p.Add(eb)
	tops := slices.Clone(mids)
	for i := range tops {
		tops[i].Y = hi[i]
	}
	if err := valueLabels(p, tops, texts); err != nil {
		return nil, err
	}
	if base := r.Samples["baseline_per_s"]; len(base) > 0 {
		m := stats(base).median
		x1 := float64(len(bars)) - 0.5
		if err := hline(p, -0.5, x1, m, red, []vg.Length{vg.Points(5), vg.Points(3)}, fmt.Sprintf("baseline median, %.1f/s", m)); err != nil {
			return nil, err
		}
		if err := hline(p, -0.5, x1, 2*m, red, []vg.Length{vg.Points(1), vg.Points(2)}, "target for claims: 2× baseline"); err != nil {
			return nil, err
		}
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.X.Min, p.X.Max = -0.6, float64(len(bars))-0.4
	p.Y.Max *= 1.12 // room for the labels
	return p, nil
}

// latencyPlot: the approve → transfer latency as a CDF, p50 and p99 marked.
func latencyPlot(r *results, sub string) (*plot.Plot, error) {
	xs := slices.Clone(r.Samples["approve_to_transfer_ms"])
	if len(xs) == 0 {
		return nil, nil
	}
	sort.Float64s(xs)
	s := stats(xs)
	p := newPlot(fmt.Sprintf("Approve signal → transfer committed, %d claims approved one at a time (target: p99 < 300 ms)", len(xs)), sub)
	p.X.Label.Text = "ms after the approve signal"
	p.Y.Label.Text = "share of claims with their transfer committed"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	l, err := cdfLine(xs, blue, nil)
	if err != nil {
		return nil, err
	}
	p.Add(l)
	p.Legend.Add("approve → transfer (CDF)", l)
	for _, q := range []struct {
		name   string
		v      float64
		dashes []vg.Length
	}{{"p50", s.median, []vg.Length{vg.Points(5), vg.Points(3)}}, {"p99", s.p99, []vg.Length{vg.Points(1), vg.Points(2)}}} {
		v, err := plotter.NewLine(plotter.XYs{{X: q.v, Y: 0}, {X: q.v, Y: 1}})
		if err != nil {
			return nil, err
		}
		v.Color, v.Dashes = red, q.dashes
		p.Add(v)
		p.Legend.Add(fmt.Sprintf("%s %.1f ms", q.name, q.v), v)
	}
	p.Legend.Left, p.Legend.Top = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	p.X.Max = s.max * 1.05
	return p, nil
}

// cdfLine is the empirical CDF of xs (sorted in place) as a step line.
func cdfLine(xs []float64, c color.Color, dashes []vg.Length) (*plotter.Line, error) {
	sort.Float64s(xs)
	cdf := make(plotter.XYs, 0, len(xs)+1)
	cdf = append(cdf, plotter.XY{X: xs[0], Y: 0})
	for i, x := range xs {
		cdf = append(cdf, plotter.XY{X: x, Y: float64(i+1) / float64(len(xs))})
	}
	l, err := plotter.NewLine(cdf)
	if err != nil {
		return nil, err
	}
	l.StepStyle, l.Color, l.Width, l.Dashes = plotter.PostStep, c, vg.Points(1.5), dashes
	return l, nil
}

// modelLatencyPlot: with a model answering in seconds, each claim's
// completion time beside its floor (its model calls' own latencies), as
// CDFs.
func modelLatencyPlot(r *results, sub string) (*plot.Plot, error) {
	done, floor := slices.Clone(r.Samples["latency_completion_ms"]), slices.Clone(r.Samples["latency_floor_ms"])
	if len(done) == 0 || len(floor) == 0 {
		return nil, nil
	}
	done, floor = secs(done), secs(floor)
	p := newPlot(fmt.Sprintf("Real model latency: %d claims, the model answering in %.1f–%.1f s a call, %.0f in flight",
		len(done), r.Values["latency_model_min_ms"]/1000, r.Values["latency_model_max_ms"]/1000, r.Values["latency_concurrency"]), sub)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "share of claims"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	for _, line := range []struct {
		xs     []float64
		name   string
		c      color.Color
		dashes []vg.Length
	}{{floor, "floor: the model's own latencies on the claim's path", grey, []vg.Length{vg.Points(5), vg.Points(3)}},
		{done, "claim completion, start to paid", blue, nil}} {
		l, err := cdfLine(line.xs, line.c, line.dashes)
		if err != nil {
			return nil, err
		}
		p.Add(l)
		s := stats(line.xs)
		p.Legend.Add(fmt.Sprintf("%s (p50 %.2f s, p99 %.2f s)", line.name, s.median, s.p99), l)
	}
	p.Legend.Left, p.Legend.Top = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	p.X.Max = slices.Max(done) * 1.05
	return p, nil
}

// recoveryPlot: per in-flight size, when each interrupted step was done
// again after the SIGKILL (box: quartiles; whiskers: 1.5 IQR; dots:
// outliers), when all the claims were done, and the 15 s target.
func recoveryPlot(r *results, sub string) (*plot.Plot, error) {
	type kill struct {
		n   int
		key string
	}
	var kills []kill
	for k, xs := range r.Samples {
		if m := killSample.FindStringSubmatch(k); m != nil && len(xs) > 0 {
			n, _ := strconv.Atoi(m[1])
			kills = append(kills, kill{n, k})
		}
	}
	if len(kills) == 0 {
		return nil, nil
	}
	sort.Slice(kills, func(i, j int) bool { return kills[i].n < kills[j].n })
	p := newPlot("Recovery after the worker is SIGKILLed: each interrupted step done again (target: p99 ≤ 15 s)", sub)
	p.Y.Label.Text = "seconds after the SIGKILL"
	p.Y.Min = 0
	var names []string
	var done plotter.XYs
	for i, k := range kills {
		secs := make(plotter.Values, len(r.Samples[k.key]))
		for j, ms := range r.Samples[k.key] {
			secs[j] = ms / 1000
		}
		b, err := plotter.NewBoxPlot(vg.Points(40), float64(i), secs)
		if err != nil {
			return nil, err
		}
		b.FillColor = color.RGBA{R: 174, G: 199, B: 232, A: 255}
		p.Add(b)
		s := stats(secs)
		label := fmt.Sprintf("%d claims in flight", k.n)
		if v, ok := r.Values[fmt.Sprintf("kill_interrupted_claims_%d_inflight", k.n)]; ok {
			label += fmt.Sprintf("\n%.0f interrupted", v)
			a, aok := r.Values[fmt.Sprintf("kill_interrupted_activity_%d_inflight", k.n)]
			t, tok := r.Values[fmt.Sprintf("kill_interrupted_task_%d_inflight", k.n)]
			if aok || tok {
				label += fmt.Sprintf(": %.0f activities, %.0f workflow tasks", a, t)
			}
		}
		names = append(names, fmt.Sprintf("%s\np50 %.1f s, p99 %.1f s", label, s.median, s.p99))
		if v, ok := r.Values[fmt.Sprintf("kill_all_done_s_%d_inflight", k.n)]; ok {
			done = append(done, plotter.XY{X: float64(i), Y: v})
		}
	}
	if len(done) > 0 {
		sc, err := plotter.NewScatter(done)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Shape, sc.GlyphStyle.Color, sc.GlyphStyle.Radius = draw.CrossGlyph{}, purple, vg.Points(5)
		p.Add(sc)
		p.Legend.Add("every claim done", sc)
	}
	if err := hline(p, -0.5, float64(len(kills))-0.5, 15, red, []vg.Length{vg.Points(5), vg.Points(3)}, "target p99: 15 s"); err != nil {
		return nil, err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(kills))-0.4
	p.Y.Max *= 1.12
	return p, nil
}

// costPlot: history events and billable actions per claim, by path.
func costPlot(r *results, sub string) (*plot.Plot, error) {
	var paths []string
	for _, p := range costPaths {
		if _, ok := r.Costs[p]; ok {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	p := newPlot("Cost per claim, by path: history events and Temporal Cloud billable actions (estimated from the history)", sub)
	p.Y.Label.Text = "per claim"
	p.Y.Min = 0
	w := vg.Points(26)
	var names []string
	var events, actions plotter.Values
	for _, path := range paths {
		c := r.Costs[path]
		names = append(names, fmt.Sprintf("%s\n%.1f KiB of history", path, float64(c.Bytes)/1024))
		events, actions = append(events, float64(c.Events)), append(actions, float64(c.Actions.Total))
	}
	for _, s := range []struct {
		vs     plotter.Values
		offset vg.Length
		color  color.Color
		legend string
	}{{events, -w / 2, grey, "history events"}, {actions, w / 2, blue, "billable actions"}} {
		bc, err := plotter.NewBarChart(s.vs, w)
		if err != nil {
			return nil, err
		}
		bc.Offset, bc.Color, bc.LineStyle.Width = s.offset, s.color, 0
		p.Add(bc)
		p.Legend.Add(s.legend, bc)
		xys := make(plotter.XYs, len(s.vs))
		texts := make([]string, len(s.vs))
		for i, v := range s.vs {
			xys[i], texts[i] = plotter.XY{X: float64(i), Y: v}, strconv.Itoa(int(v))
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign, l.TextStyle[i].Font.Size = draw.XCenter, vg.Points(8)
		}
		l.Offset = vg.Point{X: s.offset, Y: vg.Points(3)}
		p.Add(l)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(paths))-0.4
	p.Y.Max *= 1.15
	return p, nil
}

// surgePlot: the catastrophe week's pressures, as CDFs in seconds: approve
// → transfer while a surge of new claims is triaged (the priority
// workload), and how late escalations fired after their deadlines when
// thousands fell due together (the timers workload).
func surgePlot(r *results, sub string) (*plot.Plot, error) {
	pay, late := slices.Clone(r.Samples["priority_approve_to_transfer_ms"]), slices.Clone(r.Samples["timers_escalation_late_ms"])
	week := slices.Clone(r.Samples["priority_catastrophe_approve_to_transfer_ms"])
	if len(pay) == 0 && len(late) == 0 && len(week) == 0 {
		return nil, nil
	}
	p := newPlot("A surge: approve → transfer while new claims are triaged; escalations after their deadline", sub)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "share of claims"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	for _, c := range []struct {
		xs     []float64
		label  string
		col    color.Color
		dashes []vg.Length
	}{
		{pay, fmt.Sprintf("approve → transfer, %d approvals, %.0f new claims in flight", len(pay), r.Values["priority_claims"]), blue, nil},
		{week, fmt.Sprintf("the same, %d approvals, on the catastrophe week's settings", len(week)), green, nil},
		{late, fmt.Sprintf("escalation after its deadline, %d escalations (%.0f due in one minute)", len(late), r.Values["timers_busiest_minute"]),
			red, []vg.Length{vg.Points(5), vg.Points(3)}},
	} {
		if len(c.xs) == 0 {
			continue
		}
		l, err := cdfLine(secs(c.xs), c.col, c.dashes)
		if err != nil {
			return nil, err
		}
		p.Add(l)
		p.Legend.Add(c.label, l)
	}
	p.Legend.Left, p.Legend.Top = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	return p, nil
}

// peersPlot: from an engine's worker SIGKILLed at the seed's two points to
// the claim done, per engine, as CDFs; the legend carries each engine's
// claims per CPU-second and approve → pay p50 ("pay").
func peersPlot(r *results, sub string) (*plot.Plot, error) {
	var engines []string
	for k := range r.Values {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(k, "peers_"), "_claims_per_s"); ok && strings.HasPrefix(k, "peers_") {
			engines = append(engines, name)
		}
	}
	if len(engines) == 0 {
		return nil, nil
	}
	slices.Sort(engines)
	p := newPlot("The same claim on each engine: restart → claim done after a SIGKILL (solid: after the payment; dashed: in step 7)", sub)
	p.X.Label.Text = "seconds from the worker's restart"
	p.Y.Label.Text = "share of killed claims"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	palette := []color.Color{blue, red, green, orange, grey, color.Black}
	for i, name := range engines {
		k := "peers_" + name + "_"
		for j, point := range []string{"after_pay", "in_notify"} {
			xs := slices.Clone(r.Samples[k+"kill_"+point+"_recovery_ms"])
			if len(xs) == 0 {
				continue
			}
			var dashes []vg.Length
			if j == 1 {
				dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			l, err := cdfLine(secs(xs), palette[i%len(palette)], dashes)
			if err != nil {
				return nil, err
			}
			p.Add(l)
			if j == 0 {
				p.Legend.Add(fmt.Sprintf("%s (%.1f claims/CPU-s, pay %.0f ms)", name, r.Values[k+"claims_per_cpu_s"],
					percentile(r.Samples[k+"approve_pay_ms"], 50)), l)
			}
		}
	}
	p.Legend.Left, p.Legend.Top = true, false
	p.Legend.XOffs, p.Legend.YOffs = 2.3*vg.Inch, vg.Points(6) // between the engines that recover in 1 s and the rest
	return p, nil
}

// secs turns milliseconds into seconds, in place.
func secs(ms []float64) []float64 {
	for i := range ms {
		ms[i] /= 1000
	}
	return ms
}

// partsPlot: where a claim's time goes in real-model runs, one stacked bar
// a run (runs: label and results), from each run's history breakdown
// (latency_part_*_ms, mean per claim), the floor first.
func partsPlot(runs []labelled) (*plot.Plot, error) {
	p := newPlot("Where a real-model claim's time goes: mean per claim, from each claim's history", runs[0].r.Machine)
	p.X.Label.Text = "seconds"
	p.X.Min = 0
	colors := []color.Color{grey, red, orange, blue, green, color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.Black}
	names := map[string]string{partModel: "the model's own latency", partActivityRun: "activities running, beyond the model",
		partActivityQueue: "activities in the queue", partWFTRun: "workflow tasks running (local activities)",
		partWFTQueue: "workflow tasks in the queue", partClient: "client: setup, start, result", partOther: "other"}
	var below *plotter.BarChart
	for i, part := range parts {
		vs := make(plotter.Values, len(runs))
		for j, run := range runs {
			vs[j] = max(run.r.Values["latency_part_"+part+"_ms"], 0) / 1000
		}
		bc, err := plotter.NewBarChart(vs, vg.Points(22))
		if err != nil {
			return nil, err
		}
		bc.Horizontal, bc.Color, bc.LineStyle.Width = true, colors[i%len(colors)], 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(names[part], bc)
	}
	var labels []string
	for _, run := range runs {
		labels = append(labels, run.label)
	}
	p.NominalY(labels...)
	p.Y.Label.Text = "claims in flight"
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.YOffs = vg.Points(4)
	p.X.Max *= 1.5
	return p, nil
}

// labelled is one run's results and the label its bar gets.
type labelled struct {
	label string
	r     *results
}

// drawParts reads label=results.json pairs and draws partsPlot into out.
func drawParts(out string, pairs []string) error {
	var runs []labelled
	for _, pair := range pairs {
		label, file, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q: want label=results.json", pair)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var r results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if _, ok := r.Values["latency_part_model_ms"]; !ok {
			return fmt.Errorf("%s: no real-model breakdown (latency_part_*_ms)", file)
		}
		runs = append(runs, labelled{label, &r})
	}
	if len(runs) == 0 {
		return errors.New("no runs to draw")
	}
	p, err := partsPlot(runs)
	if err != nil {
		return err
	}
	return writeSVG(out, 9*vg.Inch, vg.Length(1.6+0.45*float64(len(runs)))*vg.Inch, []*plot.Plot{p})
}
