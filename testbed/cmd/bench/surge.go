package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// surgeWorkload is the catastrophe week's waiting room (-only surge, opt-in: at
// 20,000 claims it parks for a quarter of an hour): claims parked for a
// decision in steps up to -surge, and at the first step (-surge-base) and
// the last, the inbox's first page as adjuster-17 sees it (a real inbox
// process, 50 requests after 5 to warm up) and `claimsctl list --status
// waiting` (10 runs), with the worker's RSS against the same worker idle
// after as many finished claims as the first step. Each step is timed at
// once and again when the machine has settled (the parking digested: the
// list paths' own cost). The ratios of the last step to the first are the
// figures: the list paths must not grow with the claims waiting.
//
// The worker's memory is read twice at each end: 5 s after the work, and
// again after -surge-rest without any (a worker whose claims wait for
// days spends them like that). The Go runtime collects at least every two
// minutes and then returns what it freed to the OS, so the rested figures
// are what the claims parked keep, not where the last burst's garbage
// stood when the reading came: the idle reading 5 s after 1,000 claims
// varied by 17 MiB between identical runs.
type surgeWorkload struct {
	surge, surgeBase       int
	surgeRest, surgeMaxP95 time.Duration
}

func (*surgeWorkload) names() []string { return []string{"surge"} }

func (s *surgeWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&s.surge, "surge", 20000, "the surge workload (-only surge): claims waiting for a decision at its last step")
	fs.IntVar(&s.surgeBase, "surge-base", 1000, "the surge workload: claims waiting at its first step, the yardstick of the last")
	fs.DurationVar(&s.surgeRest, "surge-rest", 150*time.Second, "the surge workload: how long the worker rests, idle and again with the claims parked, before its memory is read a second time (the Go runtime collects garbage at least every two minutes and then returns it to the OS; 0: read once)")
	fs.DurationVar(&s.surgeMaxP95, "surge-max-p95", 0, "the surge workload fails when the inbox's first page p95 at its last step is above this (0: no check; CI sets it)")
}

// run measures the surge on a fresh claims worker.
func (s *surgeWorkload) run(ctx context.Context, e *env, res *results) error {
	res.surgeBase, res.surge = s.surgeBase, s.surge
	e.claims.stop()
	var err error
	if e.claims, err = e.spawnClaimsWorker("claims-worker-surge"); err != nil {
		return err
	}
	if err := s.measure(ctx, e, res, e.claims); err != nil {
		return fmt.Errorf("surge: %w", err)
	}
	return nil
}

// measure is the surge, against the claims worker w.
func (s *surgeWorkload) measure(ctx context.Context, e *env, res *results, w *proc) error {
	idle, err := e.idleAfter(ctx, w, "surge-warm", s.surgeBase)
	if err != nil {
		return err
	}
	idleRested, err := w.rest(s.surgeRest, idle)
	if err != nil {
		return err
	}
	w.memorySnapshot("surge-idle")
	inbox, err := e.spawnInbox()
	if err != nil {
		return err
	}
	ctl := filepath.Join(filepath.Dir(e.o.workerBin), "claimsctl")
	ctlEnv := append(os.Environ(), "CLAIMS_DB="+filepath.Join(e.dir, "claims.db"), "LOG_LEVEL=warn")

	prefix := fmt.Sprintf("bench-surge-%d-", seq.Add(1))
	parked := 0
	begin := time.Now()
	for _, level := range []int{s.surgeBase, s.surge} {
		pace, err := e.park(ctx, prefix, parked, level)
		if err != nil {
			return err
		}
		res.Values[fmt.Sprintf("surge_%d_starter_per_min", level)] = pace
		parked = level
		fmt.Fprintf(os.Stderr, "  %d parked after %s (bin/starter started them at %.0f a minute)\n", level, time.Since(begin).Round(time.Second), pace)
		// At once, while the server and worker still digest the parking;
		// then again once the machine has settled: the list paths' own cost.
		if err := e.surgeTimes(ctx, res, inbox, ctl, ctlEnv, level, "_at_once"); err != nil {
			return err
		}
		quiet, busy := settle(2*time.Minute, 0.3)
		res.Values[fmt.Sprintf("surge_%d_settle_s", level)] = quiet.Seconds()
		fmt.Fprintf(os.Stderr, "  settled after %s (%.2f of the machine's cores busy)\n", quiet.Round(time.Second), busy)
		if err := e.surgeTimes(ctx, res, inbox, ctl, ctlEnv, level, ""); err != nil {
			return err
		}
	}
	time.Sleep(5 * time.Second)
	after, err := w.vars()
	if err != nil {
		return err
	}
	afterRested, err := w.rest(s.surgeRest, after)
	if err != nil {
		return err
	}
	w.memorySnapshot("surge-parked")
	lo, hi := fmt.Sprintf("surge_%d", s.surgeBase), fmt.Sprintf("surge_%d", s.surge)
	for _, when := range []string{"", "_at_once"} {
		res.Values["surge_inbox_p95_ratio"+when] = res.Values[hi+"_inbox_p95_ms"+when] / res.Values[lo+"_inbox_p95_ms"+when]
		res.Values["surge_list_p95_ratio"+when] = res.Values[hi+"_list_p95_ms"+when] / res.Values[lo+"_list_p95_ms"+when]
	}
	for tag, v := range map[string]workerVars{"idle": idle, "parked": after, "idle_rested": idleRested, "parked_rested": afterRested} {
		res.Values["surge_heap_inuse_mib_"+tag] = float64(v.Mem.HeapInuse) / (1 << 20)
		res.Values["surge_heap_goal_mib_"+tag] = float64(v.Mem.NextGC) / (1 << 20)
		res.Values["surge_heap_released_mib_"+tag] = float64(v.Mem.HeapReleased) / (1 << 20)
		res.Values["surge_stacks_mib_"+tag] = float64(v.Mem.StackInuse) / (1 << 20)
		fmt.Fprintf(os.Stderr, "  worker %s: RSS %.1f MiB, heap in use %.1f MiB (goal %.1f, idle and not yet released %.1f), stacks %.1f MiB, goroutines %d\n",
			tag, float64(v.RSSBytes)/(1<<20), res.Values["surge_heap_inuse_mib_"+tag], res.Values["surge_heap_goal_mib_"+tag],
			float64(v.Mem.HeapIdle-v.Mem.HeapReleased)/(1<<20), res.Values["surge_stacks_mib_"+tag], v.Goroutines)
	}
	res.Values["surge_parked"] = float64(s.surge)
	res.Values["surge_rss_idle_mib"] = float64(idle.RSSBytes) / (1 << 20)
	res.Values["surge_rss_parked_mib"] = float64(after.RSSBytes) / (1 << 20)
	res.Values["surge_rss_ratio"] = float64(after.RSSBytes) / float64(idle.RSSBytes)
	res.Values["surge_rest_s"] = s.surgeRest.Seconds()
	res.Values["surge_rss_idle_mib_rested"] = float64(idleRested.RSSBytes) / (1 << 20)
	res.Values["surge_rss_parked_mib_rested"] = float64(afterRested.RSSBytes) / (1 << 20)
	res.Values["surge_rss_ratio_rested"] = float64(afterRested.RSSBytes) / float64(idleRested.RSSBytes)
	fmt.Fprintf(os.Stderr, "  %d vs %d waiting: inbox p95 ×%.2f, claimsctl list p95 ×%.2f; worker RSS %.1f → %.1f MiB (×%.3f), rested %s: %.1f → %.1f MiB (×%.3f)\n",
		s.surge, s.surgeBase, res.Values["surge_inbox_p95_ratio"], res.Values["surge_list_p95_ratio"],
		res.Values["surge_rss_idle_mib"], res.Values["surge_rss_parked_mib"], res.Values["surge_rss_ratio"],
		s.surgeRest, res.Values["surge_rss_idle_mib_rested"], res.Values["surge_rss_parked_mib_rested"], res.Values["surge_rss_ratio_rested"])
	if limit := s.surgeMaxP95; limit > 0 && res.Values[hi+"_inbox_p95_ms"] > ms(limit) {
		return fmt.Errorf("the inbox's first page p95 is %.0f ms with %d claims waiting, above %s", res.Values[hi+"_inbox_p95_ms"], s.surge, limit)
	}
	return nil
}

// rest waits d without giving the worker work and reads its memory again
// (now, when d is 0).
func (p *proc) rest(d time.Duration, now workerVars) (workerVars, error) {
	if d <= 0 {
		return now, nil
	}
	time.Sleep(d)
	return p.vars()
}

// surgeTimes times the inbox's first page and `claimsctl list --status
// waiting` with level claims waiting, under keys ending in when, with the
// cores the machine kept busy meanwhile.
func (e *env) surgeTimes(ctx context.Context, res *results, inbox *inboxProc, ctl string, ctlEnv []string, level int, when string) error {
	since := busySince()
	page, err := inbox.firstPage(ctx, 5, 50)
	if err != nil {
		return err
	}
	list, err := timeRuns(10, func() error {
		cmd := exec.CommandContext(ctx, ctl, "list", "--status", "waiting")
		cmd.Env = ctlEnv
		out, err := cmd.CombinedOutput()
		if err == nil && !strings.Contains(string(out), fmt.Sprintf("%d waiting for a decision", level)) {
			err = fmt.Errorf("claimsctl list does not count %d waiting: %.200s", level, out)
		}
		return err
	})
	if err != nil {
		return err
	}
	busy := since()
	tag := fmt.Sprintf("surge_%d", level)
	res.Values[tag+"_inbox_p50_ms"+when], res.Values[tag+"_inbox_p95_ms"+when] = ms(pct(page, 50)), ms(pct(page, 95))
	res.Values[tag+"_list_p50_ms"+when], res.Values[tag+"_list_p95_ms"+when] = ms(pct(list, 50)), ms(pct(list, 95))
	res.Values[tag+"_busy_cores"+when] = busy
	label := "settled"
	if when != "" {
		label = "at once"
	}
	fmt.Fprintf(os.Stderr, "  %d waiting, %s: inbox first page p50 %.0f ms, p95 %.0f ms; claimsctl list p50 %.0f ms, p95 %.0f ms (%.2f cores busy)\n", level, label,
		res.Values[tag+"_inbox_p50_ms"+when], res.Values[tag+"_inbox_p95_ms"+when], res.Values[tag+"_list_p50_ms"+when], res.Values[tag+"_list_p95_ms"+when], busy)
	return nil
}

// busySince returns how many of the machine's cores have been busy, on
// average, from now until it is called.
func busySince() func() float64 {
	b0, t0 := busyCPU(), time.Now()
	return func() float64 { return float64(busyCPU()-b0) / float64(time.Since(t0)) }
}

// settle waits, at most limit, until the machine keeps fewer than cores of
// its CPUs busy over five seconds; it returns how long that took and the
// cores busy over the last five seconds.
func settle(limit time.Duration, cores float64) (time.Duration, float64) {
	begin := time.Now()
	for {
		since := busySince()
		time.Sleep(5 * time.Second)
		if busy := since(); busy < cores || time.Since(begin) >= limit {
			return time.Since(begin), busy
		}
	}
}

var tokenField = regexp.MustCompile(`name="token" value="([^"]+)"`)

// inboxProc is a running inbox with a signed-in session.
type inboxProc struct {
	url    string
	client *http.Client
}

// spawnInbox starts bin/inbox on the bench's store and directory, with the
// development sign-in on loopback, and signs in as adjuster-17.
func (e *env) spawnInbox() (*inboxProc, error) {
	key, err := authority.GenerateKey("inbox", true)
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(e.dir, "inbox.key")
	if err := key.Write(keyPath); err != nil {
		return nil, err
	}
	if err := authority.AddKey(e.approversFile(), key); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if _, err := e.spawn("inbox", filepath.Join(filepath.Dir(e.o.workerBin), "inbox"), nil, []string{
		"INBOX_ADDR=" + addr, "INBOX_DEV_LOGIN=1", "INBOX_SIGNING_KEY=" + keyPath, "APPROVERS_FILE=" + e.approversFile(),
		"CLAIMS_DB=" + filepath.Join(e.dir, "claims.db"), "BLOB_URL=" + e.blobURL(),
	}); err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	p := &inboxProc{url: "http://" + addr, client: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := p.client.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the inbox never served: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The sign-in page sets the form token's cookie and shows the token.
	resp, err := p.client.Get(p.url + "/")
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := tokenField.FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("the inbox showed no sign-in form: %.300s", b)
	}
	resp, err = p.client.PostForm(p.url+"/dev-login", url.Values{"approver": {"adjuster-17"}, "token": {string(m[1])}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if _, err := p.firstPage(context.Background(), 0, 1); err != nil {
		return nil, fmt.Errorf("signed in as adjuster-17: %w", err)
	}
	return p, nil
}

// firstPage times GET / (warm requests first, then n measured).
func (p *inboxProc) firstPage(ctx context.Context, warm, n int) ([]time.Duration, error) {
	get := func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
		resp, err := p.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="counts"`) {
			return fmt.Errorf("inbox: %s: %.300s", resp.Status, b)
		}
		return nil
	}
	if _, err := timeRuns(warm, get); err != nil {
		return nil, err
	}
	return timeRuns(n, get)
}

// timeRuns runs f n times, one after another, and returns each duration.
func timeRuns(n int, f func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(min(i, len(s))-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
