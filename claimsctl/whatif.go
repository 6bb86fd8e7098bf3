package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/whatif"
	"github.com/durableclaims/durableclaims/worker/heartbeat"
)

// whatifMemo is the memo key that holds the digest of a what-if's input:
// a rerun with the same ID resumes it only with the same claims and
// candidate.
const whatifMemo = "whatif_input_sha256"

// whatIfCmd runs a what-if (docs/whatif.md): it selects closed claims,
// starts the what-if workflow (or resumes it, when one with the ID exists),
// serves it with a worker of its own that can only read and ask the
// candidate, shows progress, and writes the report.
func whatIfCmd(args []string, stdout, stderr io.Writer) int {
	var f whatIfFlags
	fs := flag.NewFlagSet("whatif", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.define(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "claimsctl whatif:", err)
		return 1
	}
	cand, in, err := f.candidate()
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	src, err := openWhatIfSources(ctx)
	if err != nil {
		return fail(err)
	}
	defer src.close()
	run, err := f.start(ctx, src, in, stderr)
	if err != nil {
		return fail(err)
	}
	stopWorker, err := f.serve(src, cand)
	if err != nil {
		return fail(err)
	}
	defer stopWorker()
	if err := f.report(ctx, src.c, run, stdout, stderr); err != nil {
		return fail(err)
	}
	return 0
}

// whatIfFlags are whatif's flags.
type whatIfFlags struct {
	id, claims, since, until, outcome string
	sample                            int
	provider, name, baseURL, prompts  string
	policyFile                        string
	priceIn, priceOut                 int64
	concurrency                       int
	spendCap, out                     string
	asJSON                            bool
}

func (f *whatIfFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "the what-if's ID (default: derived from the selection and the candidate, so a rerun resumes it)")
	fs.StringVar(&f.claims, "claims", "", "comma-separated claim IDs")
	fs.StringVar(&f.since, "since", "", "claims closed within this long (720h) or since this time (RFC 3339)")
	fs.StringVar(&f.until, "until", "", "claims closed before this time (RFC 3339)")
	fs.StringVar(&f.outcome, "outcome", "", "only claims that ended so: comma-separated paid, rejected, expired, withdrawn, dead-lettered")
	fs.IntVar(&f.sample, "sample", 0, "a sample of N of the selected claims (the same N for the same ID)")
	fs.StringVar(&f.provider, "model-provider", config.Get("MODEL_PROVIDER", "rules"), "the candidate model: rules or openai")
	fs.StringVar(&f.name, "model-name", config.Get("MODEL_NAME", ""), "the candidate model's name (openai)")
	fs.StringVar(&f.baseURL, "model-base-url", config.Get("MODEL_BASE_URL", ""), "the candidate's Chat Completions endpoint (openai); its key is MODEL_API_KEY")
	fs.StringVar(&f.prompts, "prompts", "", "the candidate's system prompts, a JSON file (openai; default: this build's)")
	fs.StringVar(&f.policyFile, "policy", "", "the candidate insurer policy, a JSON file like POLICY_FILE (default: each claim's recorded policy)")
	fs.Int64Var(&f.priceIn, "price-in", 0, "the candidate's price, micro-dollars per million input tokens")
	fs.Int64Var(&f.priceOut, "price-out", 0, "the candidate's price, micro-dollars per million output tokens")
	fs.IntVar(&f.concurrency, "concurrency", 4, "claims evaluated at once")
	fs.StringVar(&f.spendCap, "spend-cap", "", "stop starting claims once the candidate has cost this many dollars (e.g. 5.00)")
	fs.StringVar(&f.out, "out", "", "where the report goes: report.md, report.json, payout-deltas.svg (default var/whatif/ID)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON instead of Markdown")
}

// candidate checks the flags and returns the candidate model and the
// what-if's input.
func (f *whatIfFlags) candidate() (model.Model, whatif.Input, error) {
	cand, err := candidateModel(f.provider, f.name, f.baseURL, f.prompts)
	if err != nil {
		return nil, whatif.Input{}, err
	}
	var policy *insurer.Rules
	if f.policyFile != "" {
		p, err := insurer.Load(f.policyFile, func(string) string { return "" })
		if err != nil {
			return nil, whatif.Input{}, fmt.Errorf("--policy: %w", err)
		}
		policy = &p
	}
	capMicros, err := dollarsToMicros(f.spendCap)
	if err != nil {
		return nil, whatif.Input{}, fmt.Errorf("--spend-cap %q: %w", f.spendCap, err)
	}
	if capMicros > 0 && f.priceIn == 0 && f.priceOut == 0 {
		return nil, whatif.Input{}, errors.New("--spend-cap needs the candidate's price (--price-in, --price-out): without it every answer costs 0 and the cap never stops anything")
	}
	if f.id != "" && !strings.HasPrefix(f.id, claim.ReservedIDPrefix) {
		// The Temporal server's authorizer lets the what-if identity answer
		// only runs named so (temporalserver/authz).
		return nil, whatif.Input{}, fmt.Errorf("--id %q: a what-if's ID begins %q", f.id, claim.ReservedIDPrefix)
	}
	if f.concurrency < 1 || f.concurrency > 64 {
		return nil, whatif.Input{}, fmt.Errorf("--concurrency %d: want 1 to 64", f.concurrency)
	}
	in := whatif.Input{Candidate: whatif.Candidate{Model: cand.Name(), PromptVersion: cand.PromptVersion(), Policy: policy},
		Concurrency: f.concurrency, SpendCapMicros: capMicros}
	if policy != nil {
		in.Candidate.PolicyVersion = policy.Version()
	}
	return cand, in, nil
}

// whatIfSources are what a what-if reads: the claims store (read-only),
// the blob store, the policies, and Temporal.
type whatIfSources struct {
	st       *store.Store
	bs       *blobs.Store
	policies map[string]claim.Policy
	c        client.Client
}

// openWhatIfSources opens the sources. On an error, whatever it opened
// is closed again.
func openWhatIfSources(ctx context.Context) (whatIfSources, error) {
	st, err := store.OpenReadOnly(config.ClaimsDB())
	if err != nil {
		return whatIfSources{}, err
	}
	bs, err := blobs.Open(ctx, config.Get("BLOB_URL", ""))
	if err != nil {
		st.Close()
		return whatIfSources{}, err
	}
	policies, err := activities.LoadPolicies(config.Get("POLICIES_FILE", ""))
	if err != nil {
		bs.Close()
		st.Close()
		return whatIfSources{}, err
	}
	c, err := dial(ctx)
	if err != nil {
		bs.Close()
		st.Close()
		return whatIfSources{}, err
	}
	return whatIfSources{st: st, bs: bs, policies: policies, c: c}, nil
}

func (s whatIfSources) close() {
	s.c.Close()
	s.bs.Close()
	s.st.Close()
}

// start starts the what-if, or resumes the one with its ID (by default
// derived from the selection and the candidate).
func (f *whatIfFlags) start(ctx context.Context, src whatIfSources, in whatif.Input, stderr io.Writer) (client.WorkflowRun, error) {
	sel := selection{claims: f.claims, since: f.since, until: f.until, outcome: f.outcome, sample: f.sample}
	if f.id == "" {
		f.id = defaultWhatIfID(sel, in, f.priceIn, f.priceOut, time.Now())
	}
	// What a resumed what-if must share with the one it resumes: the
	// candidate (with its endpoint and price), the pace, the budget and
	// the selection's flags.
	identity := digest(fmt.Sprintf("%s %s %d %d %+v", digest(in), f.baseURL, f.priceIn, f.priceOut, sel))
	run, resumed, err := startWhatIf(ctx, src.c, f.id, in, identity, func() ([]string, error) { return sel.resolve(ctx, src.st, f.id) },
		func(ids []string) error { return sel.admits(ctx, src.st, ids) })
	if err != nil {
		return nil, err
	}
	if resumed {
		fmt.Fprintf(stderr, "whatif %s: resuming\n", f.id)
	} else {
		fmt.Fprintf(stderr, "whatif %s: candidate %s (prompt %s), policy %s\n", f.id, in.Candidate.Model,
			short(in.Candidate.PromptVersion), cmp.Or(short(in.Candidate.PolicyVersion), "as recorded"))
	}
	return run, nil
}

// serve runs the what-if's own worker, which can only read and ask the
// candidate, until stop.
func (f *whatIfFlags) serve(src whatIfSources, cand model.Model) (stop func(), err error) {
	acts := &whatif.Activities{Model: cand, Price: activities.Price{InMicrosPerMTok: f.priceIn, OutMicrosPerMTok: f.priceOut},
		Store: src.st, Blobs: src.bs, Policies: src.policies, WhatIf: f.id, Parent: parentOf(src.c)}
	w := sdkworker.New(src.c, whatif.TaskQueue(f.id), sdkworker.Options{MaxConcurrentActivityExecutionSize: 2 * f.concurrency,
		MaxConcurrentLocalActivityExecutionSize: 1, DisableRegistrationAliasing: true,
		Interceptors: []interceptor.WorkerInterceptor{heartbeat.New(src.c)}})
	whatif.Register(w, acts)
	if err := w.Start(); err != nil {
		return nil, err
	}
	return w.Stop, nil
}

// report waits for the what-if, shows its progress, writes the report
// under --out and prints it.
func (f *whatIfFlags) report(ctx context.Context, c client.Client, run client.WorkflowRun, stdout, stderr io.Writer) error {
	sum, err := awaitWhatIf(ctx, c, run, stderr)
	if err != nil {
		return err
	}
	rows, err := whatIfRows(ctx, c, f.id, sum)
	if err != nil {
		return err
	}
	rep := whatif.NewReport(f.id, sum, rows, time.Now().UTC())
	dir := cmp.Or(f.out, filepath.Join("var", "whatif", f.id))
	if err := writeReport(rep, dir); err != nil {
		return err
	}
	if f.asJSON {
		err = rep.JSON(stdout)
	} else {
		err = rep.Markdown(stdout)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "whatif %s: report in %s\n", f.id, dir)
	return nil
}

// candidateModel is the model being tried.
func candidateModel(provider, name, baseURL, promptsFile string) (model.Model, error) {
	switch provider {
	case "rules":
		if promptsFile != "" {
			return nil, errors.New("--prompts needs --model-provider openai: the rules model has no prompt")
		}
		return model.RulesModel{}, nil
	case "openai":
		cfg := model.OpenAIConfig{BaseURL: baseURL, Model: name, APIKey: config.Get("MODEL_API_KEY", "")}
		if promptsFile != "" {
			p, err := model.LoadPrompts(promptsFile)
			if err != nil {
				return nil, fmt.Errorf("--prompts: %w", err)
			}
			cfg.Prompts = &p
		}
		return model.NewOpenAIModel(cfg)
	}
	return nil, fmt.Errorf("--model-provider %q: want rules or openai", provider)
}

// dollarsToMicros reads "5.00" as 5,000,000 micro-dollars; "" is no cap.
func dollarsToMicros(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	cents, err := claim.ParseAmount(s, "usd")
	if err != nil || cents <= 0 {
		return 0, fmt.Errorf("want an amount in dollars, as in 5.00")
	}
	return cents * 10_000, nil
}

// defaultWhatIfID names a what-if by its selection's flags and its
// candidate's JSON (the policy by value, not by pointer): the same command
// gets the same ID, so running it again resumes it.
// A window relative to now (--since 720h) names another what-if each day.
func defaultWhatIfID(sel selection, in whatif.Input, priceIn, priceOut int64, now time.Time) string {
	day := ""
	if _, err := time.ParseDuration(sel.since); err == nil {
		day = now.UTC().Format(time.DateOnly)
	}
	return "whatif-" + digest(fmt.Sprintf("%+v %s %d %d %s", sel, digest(in), priceIn, priceOut, day))[:12]
}

func digest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// selection is which closed claims a what-if takes.
type selection struct {
	claims, since, until, outcome string
	sample                        int
}

// matching lists the claims the selection names, sorted, before any
// sample; slack widens a window relative to now (--since DURATION) back by
// that much.
func (s selection) matching(ctx context.Context, st *store.Store, slack time.Duration) ([]string, error) {
	var ids []string
	if s.claims != "" {
		for _, id := range strings.Split(s.claims, ",") {
			if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids, nil
	}
	var from, to time.Time
	if s.since != "" {
		if d, err := time.ParseDuration(s.since); err == nil {
			from = time.Now().Add(-d - slack)
		} else if from, err = time.Parse(time.RFC3339, s.since); err != nil {
			return nil, fmt.Errorf("--since %q: want a duration (720h) or an RFC 3339 time", s.since)
		}
	}
	if s.until != "" {
		var err error
		if to, err = time.Parse(time.RFC3339, s.until); err != nil {
			return nil, fmt.Errorf("--until %q: want an RFC 3339 time", s.until)
		}
	}
	outcomes := strings.Split(s.outcome, ",")
	files, err := st.ClaimFiles(ctx)
	if err != nil {
		return nil, err
	}
	last := map[string]store.ClaimFile{} // each claim's latest file: the run that ended it
	for _, f := range files {
		last[f.ClaimID] = f
	}
	for id, f := range last {
		switch {
		case !from.IsZero() && f.WrittenAt.Before(from), !to.IsZero() && !f.WrittenAt.Before(to):
		case s.outcome != "" && !slices.Contains(outcomes, f.Outcome):
		default:
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// admits says whether ids can be the claims this selection gave a what-if
// started earlier: the claims named, exactly; or claims the window matches
// (a window relative to now, as it stood up to a day ago: the what-if's ID
// names the day), no more than the sample.
func (s selection) admits(ctx context.Context, st *store.Store, ids []string) error {
	if s.claims != "" {
		want, err := s.matching(ctx, st, 0)
		if err != nil {
			return err
		}
		if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("it was given %d claims, not the %d --claims names", len(ids), len(want))
		}
		return nil
	}
	if s.sample > 0 && len(ids) > s.sample {
		return fmt.Errorf("it was given %d claims, more than the sample of %d", len(ids), s.sample)
	}
	all, err := s.matching(ctx, st, 24*time.Hour)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := slices.BinarySearch(all, id); !ok {
			return fmt.Errorf("it was given claim %q, which the selection does not name", id[:min(len(id), 80)])
		}
	}
	return nil
}

// resolve lists the claims: those named, or those whose claim file was
// written in the window, with the outcome, sampled. A sample is the same
// for the same seed (the what-if's ID, or the selection itself).
func (s selection) resolve(ctx context.Context, st *store.Store, seed string) ([]string, error) {
	ids, err := s.matching(ctx, st, 0)
	if err != nil {
		return nil, err
	}
	if s.claims == "" && s.sample > 0 && s.sample < len(ids) {
		seed = cmp.Or(seed, fmt.Sprint(s))
		slices.SortFunc(ids, func(x, y string) int { return strings.Compare(digest(seed+x), digest(seed+y)) })
		ids = ids[:s.sample]
		slices.Sort(ids)
	}
	if len(ids) == 0 {
		return nil, errors.New("no closed claim matches the selection")
	}
	if len(ids) > whatif.MaxClaims {
		return nil, fmt.Errorf("%d claims match; a what-if takes at most %d: narrow the window or --sample", len(ids), whatif.MaxClaims)
	}
	return ids, nil
}

// startWhatIf starts the what-if on the claims selected, or finds the one
// with this ID: resumed when it tries the same candidate the same way, an
// error when the ID is another's.
func startWhatIf(ctx context.Context, c client.Client, id string, in whatif.Input, sum string, selected func() ([]string, error), admits func([]string) error) (client.WorkflowRun, bool, error) {
	d, err := c.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, false, err
	default:
		info := d.RawResponse.GetWorkflowExecutionInfo()
		var heldSum string
		if p := info.GetMemo().GetFields()[whatifMemo]; p != nil {
			// A memo is a payload like any other: encrypted by default.
			dc, err := config.DataConverter()
			if err != nil {
				return nil, false, err
			}
			_ = dc.FromPayload(p, &heldSum)
		}
		if heldSum != sum {
			return nil, false, fmt.Errorf("what-if %s exists with another candidate, endpoint, price, pace, budget or selection: choose another --id", id)
		}
		if s := info.GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && s != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED &&
			s != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			return nil, false, fmt.Errorf("what-if %s ended %s: choose another --id to run it again", id, s)
		}
		// The memo is whatever its starter wrote: anyone who reaches the
		// frontend can start a run under this ID with this memo and other
		// claims, to have this command's worker read them into a history
		// of theirs. What the run was given must be what this command
		// would give it.
		held, err := startedWith(ctx, c, id, info.GetExecution().GetRunId())
		if err != nil {
			return nil, false, err
		}
		if err = sameWhatIf(held, in); err == nil {
			err = admits(held.ClaimIDs)
		}
		if err != nil {
			return nil, false, fmt.Errorf("what-if %s exists, but %w: not resuming it; choose another --id (and look at who started it)", id, err)
		}
		return c.GetWorkflow(ctx, id, ""), true, nil
	}
	if in.ClaimIDs, err = selected(); err != nil {
		return nil, false, err
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: whatif.TaskQueue(id),
		Memo: map[string]any{whatifMemo: sum}, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true},
		whatif.WorkflowName, in)
	return run, false, err
}

// startedWith reads the input a what-if's run was started (or continued)
// with, from its first event.
func startedWith(ctx context.Context, c client.Client, id, runID string) (whatif.Input, error) {
	var in whatif.Input
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("what-if %s: its run has no history", id)
	}
	e, err := it.Next()
	if err != nil {
		return in, err
	}
	a := e.GetWorkflowExecutionStartedEventAttributes()
	if a == nil || a.GetWorkflowType().GetName() != whatif.WorkflowName {
		return in, fmt.Errorf("what-if %s: its run is not a %s", id, whatif.WorkflowName)
	}
	dc, err := config.DataConverter()
	if err != nil {
		return in, err
	}
	if err := dc.FromPayloads(a.GetInput(), &in); err != nil {
		return in, fmt.Errorf("what-if %s: its input: %w", id, err)
	}
	return in, nil
}

// sameWhatIf says how a run's candidate or pace differs from the one
// wanted (its claims are the selection's to judge: admits).
func sameWhatIf(held, want whatif.Input) error {
	switch {
	case digest(held.Candidate) != digest(want.Candidate):
		return errors.New("it was given another candidate")
	case held.Concurrency != want.Concurrency || held.SpendCapMicros != want.SpendCapMicros:
		return errors.New("it was given another pace or spend cap")
	}
	return nil
}

// parentOf asks the Temporal server which workflow started a run.
func parentOf(c client.Client) func(ctx context.Context, workflowID, runID string) (string, error) {
	return func(ctx context.Context, workflowID, runID string) (string, error) {
		d, err := c.DescribeWorkflow(ctx, workflowID, runID)
		if err != nil {
			return "", err
		}
		return d.RawResponse.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId(), nil
	}
}

// awaitWhatIf shows progress until the what-if ends.
func awaitWhatIf(ctx context.Context, c client.Client, run client.WorkflowRun, stderr io.Writer) (whatif.Summary, error) {
	done := make(chan error, 1)
	var sum whatif.Summary
	go func() { done <- run.Get(ctx, &sum) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var last whatif.Progress
	for {
		select {
		case err := <-done:
			if err != nil {
				return sum, fmt.Errorf("what-if %s: %w", run.GetID(), err)
			}
			fmt.Fprintf(stderr, "whatif %s: done: %d evaluated, %d changed (%d dangerous), %d not evaluated, %d not started, $%.4f spent\n",
				run.GetID(), sum.Evaluated, sum.Changed, sum.Dangerous, sum.NotEvaluated, len(sum.NotStarted), float64(sum.SpentMicros)/1e6)
			return sum, nil
		case <-tick.C:
			v, err := c.QueryWorkflow(ctx, run.GetID(), "", whatif.QueryProgress)
			var p whatif.Progress
			if err != nil || v.Get(&p) != nil || p == last {
				continue
			}
			last = p
			fmt.Fprintf(stderr, "whatif %s: %d/%d done, %d changed (%d dangerous), $%.4f spent\n",
				run.GetID(), p.Done(), p.Total, p.Changed, p.Dangerous, float64(p.SpentMicros)/1e6)
		}
	}
}

// whatIfRows reads every started claim's row from its claim workflow; a
// row that cannot be read (the run timed out, or the namespace forgot it)
// is reported as not evaluated, with why.
func whatIfRows(ctx context.Context, c client.Client, id string, sum whatif.Summary) ([]whatif.Row, error) {
	started := sum.ClaimIDs[:len(sum.ClaimIDs)-len(sum.NotStarted)]
	rows := make([]whatif.Row, len(started))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, claimID := range started {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := c.GetWorkflow(ctx, whatif.ClaimRunID(id, claimID), "").Get(ctx, &rows[i]); err != nil {
				rows[i] = whatif.Row{ClaimID: claimID, Error: "not evaluated: its row could not be read: " + err.Error()}
			}
		}()
	}
	wg.Wait()
	return rows, ctx.Err()
}

func writeReport(rep whatif.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{"report.md": rep.Markdown, "report.json": rep.JSON} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return rep.Plot(filepath.Join(dir, "payout-deltas.svg"))
}
