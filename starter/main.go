// Command starter starts claims: it validates every claim first (a malformed
// one exits 2 with the field and the reason, and nothing is started),
// registers each in the claims system of record, and starts one
// ClaimWorkflow per claim with the claim ID as workflow ID. Starting a claim
// that already exists returns the existing run, never a second one.
//
//	starter [flags] CLAIM.json|DIR...
//	starter [flags] --claim-id claim-0042 --policy pol-1001 --name … --email … --account acct_… --amount 1840.00 [--currency usd]
//	starter [flags] --review-of claim-0042 --reason "…" [--by WHO]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/workflows"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitInvalid = 2
)

func main() {
	config.OwnerOnly()
	stopTracing, err := telemetry.Main("starter")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(2)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stopTracing()
	os.Exit(code)
}

type options struct {
	autoApprove   string
	approvalTTL   time.Duration
	escalationTTL time.Duration
	reminderAt    float64
	finalOutcome  string
	maxSteps      int
	maxSpend      string
	maxPayout     string
	maxAge        time.Duration
	maxTurns      int
	maxTokens     int64
	fourEyes      string
	registerOnly  bool
	concurrency   int
	timeout       time.Duration
	progress      time.Duration
	priority      int
	docsRoot      string
	file          claim.File
	review        review
}

func run(args []string, stdout, stderr io.Writer) int {
	o, paths, code := parseArgs(args, stderr)
	if code != exitOK {
		return code
	}
	if o.review.of != "" {
		return runReview(o, stdout, stderr)
	}
	// Validate everything before starting anything.
	claims, ok := gatherClaims(o, paths, stderr)
	inputs, checked := checkClaims(o, claims, stderr)
	if !ok || !checked {
		fmt.Fprintln(stderr, "starter: nothing started")
		return exitInvalid
	}
	l, err := connect()
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitFailed
	}
	defer l.close()
	// An interrupt stops taking claims; those under way finish. Each claim
	// is idempotent (registered, then started under its own ID), so the
	// same command run again resumes: a claim already started is reported
	// and not started twice.
	stop, unstop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer unstop()
	context.AfterFunc(stop, unstop) // a second interrupt ends the process at once
	b := startAll(stop, o, l, claims, inputs, stdout, stderr)
	return finish(stop, b, len(inputs), stdout, stderr)
}

// parseArgs reads the flags and finds the claim files; code is exitOK to
// go on, or the exit code.
func parseArgs(args []string, stderr io.Writer) (o options, paths []string, code int) {
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		return o, nil, exitInvalid
	}
	if o.concurrency < 1 || o.timeout <= 0 || o.progress < 0 || o.priority < 0 || o.priority > 5 {
		fmt.Fprintln(stderr, "starter: --concurrency must be 1 or more, --timeout positive, --progress 0 or more, --priority 1 to 5 (0: the default)")
		return o, nil, exitInvalid
	}
	paths, err := claimFiles(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return o, nil, exitInvalid
	}
	if o.review.of != "" {
		if len(paths) > 0 || o.file.ClaimID != "" || o.registerOnly {
			fmt.Fprintln(stderr, "starter: --review-of starts one review: no claim files, --claim-id or --register-only with it")
			return o, nil, exitInvalid
		}
		return o, nil, exitOK
	}
	if len(paths) == 0 && o.file.ClaimID == "" {
		fmt.Fprintln(stderr, "starter: give claim files, or --claim-id and the other claim flags")
		fs.Usage()
		return o, nil, exitInvalid
	}
	return o, paths, exitOK
}

// define defines the flags on fs.
func (o *options) define(fs *flag.FlagSet) {
	// Every option defaults to the worker's policy; one given here may only
	// tighten it (a looser one is refused by the worker, naming it).
	fs.StringVar(&o.autoApprove, "auto-approve", "", "largest payout paid without a human, in the claim's currency (default: the worker's policy; lower only)")
	fs.DurationVar(&o.approvalTTL, "approval-ttl", 0, "how long adjusters have before a wait escalates (default: the worker's policy; shorter only)")
	fs.DurationVar(&o.escalationTTL, "escalation-ttl", 0, "how long supervisors then have before the final outcome (shorter only)")
	fs.Float64Var(&o.reminderAt, "reminder-at", 0, "remind the adjusters at this fraction of the TTL (earlier only)")
	fs.StringVar(&o.finalOutcome, "final-outcome", "", "when nobody decides: reject (the claim expires unpaid), or approve where the worker's policy allows it")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "cap on activity executions per run, retries included (lower only)")
	fs.StringVar(&o.maxSpend, "max-model-spend", "", "cap on model spend per run, in US dollars (lower only)")
	fs.StringVar(&o.maxPayout, "max-payout", "", "cap on the payout, in the claim's currency (lower only)")
	fs.DurationVar(&o.maxAge, "max-age", 0, "cap on a run's age, approval waits included (lower only)")
	fs.IntVar(&o.maxTurns, "max-triage-turns", envInt("TRIAGE_MAX_TURNS", 0), "cap on the triage agent's model turns; past it a human triages (env TRIAGE_MAX_TURNS; lower only)")
	fs.Int64Var(&o.maxTokens, "max-triage-tokens", int64(envInt("TRIAGE_MAX_TOKENS", 0)), "cap on the tokens triage may use; past it a human triages (env TRIAGE_MAX_TOKENS; lower only)")
	fs.StringVar(&o.docsRoot, "docs-root", config.Get("DOCS_ROOT", ""), "read documents only under this directory (env DOCS_ROOT; default: each claim file's own directory)")
	fs.BoolVar(&o.registerOnly, "register-only", false, "register the claims in the system of record (documents stored) without starting them")
	fs.IntVar(&o.concurrency, "concurrency", 16, "claims started at a time (a surge: thousands a minute)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long one claim may take to register and start")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "how often a batch of claims reports progress on stderr (0: never)")
	fs.IntVar(&o.priority, "priority", 0, "task priority of the claims' workflow tasks, 1 (first) to 5 (last); 0: the server's default, 3. In a surge start new intake at 4: claims already waiting are decided and paid ahead of it")
	fs.StringVar(&o.fourEyes, "four-eyes-above", "", "payout above which two approvers must agree, in the claim's currency (lower only)")
	fs.StringVar(&o.file.ClaimID, "claim-id", "", "start one claim from flags: its ID")
	fs.StringVar(&o.file.PolicyID, "policy", "", "policy ID")
	fs.StringVar(&o.file.Claimant.Name, "name", "", "claimant name")
	fs.StringVar(&o.file.Claimant.Email, "email", "", "claimant e-mail")
	fs.StringVar(&o.file.Claimant.StripeAccount, "account", "", "claimant Stripe connected account (acct_…)")
	fs.StringVar(&o.file.Amount, "amount", "", "claimed amount, a decimal string like 1840.00")
	fs.StringVar(&o.file.Currency, "currency", "usd", "currency")
	fs.StringVar(&o.file.Description, "description", "", "what happened")
	o.review.define(fs)
}

// namedClaim is a claim and where it came from: a file, or the flags.
type namedClaim struct {
	source string
	claim  claim.Claim
	root   string // documents are read only under it
}

// gatherClaims reads the claim from the flags and those in the files,
// reporting each that does not parse; ok is false if any did not.
func gatherClaims(o options, paths []string, stderr io.Writer) (claims []namedClaim, ok bool) {
	ok = true
	if o.file.ClaimID != "" {
		c, err := o.file.Claim()
		if err != nil {
			report(stderr, "flags", err)
			ok = false
		}
		root := o.docsRoot
		if root == "" {
			root = "." // a claim from flags has no documents
		}
		claims = append(claims, namedClaim{"flags", c, root})
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			ok = false
			continue
		}
		c, err := claim.Parse(data)
		if err != nil {
			report(stderr, path, err)
			ok = false
		}
		// Document paths are relative to the claim file, and read only under
		// the documents root: by default, the claim file's own directory.
		for i, d := range c.Documents {
			if d.Path != "" && !filepath.IsAbs(d.Path) {
				c.Documents[i].Path = filepath.Join(filepath.Dir(path), d.Path)
			}
		}
		root := o.docsRoot
		if root == "" {
			root = filepath.Dir(path)
		}
		claims = append(claims, namedClaim{path, c, root})
	}
	return claims, ok
}

// checkClaims checks the claims' documents, that no claim ID comes twice,
// and the options against each claim, and returns the workflows' inputs;
// ok is false if anything was reported.
func checkClaims(o options, claims []namedClaim, stderr io.Writer) (inputs []workflows.ClaimInput, ok bool) {
	ok = true
	for _, n := range claims {
		if err := checkDocuments(n.claim, n.root); err != nil {
			report(stderr, n.source, err)
			ok = false
		}
	}
	seen := map[string]string{}
	for _, n := range claims {
		if prev, dup := seen[n.claim.ID]; dup && n.claim.ID != "" {
			fmt.Fprintf(stderr, "%s: claim_id: %s is also in %s\n", n.source, n.claim.ID, prev)
			ok = false
		}
		seen[n.claim.ID] = n.source
	}
	inputs = make([]workflows.ClaimInput, 0, len(claims))
	for _, n := range claims {
		in, err := o.input(n.claim)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", n.source, err)
			ok = false
		}
		inputs = append(inputs, in)
	}
	return inputs, ok
}

// links are what the starter talks to: the claims store, Temporal, and
// the blob store documents go to.
type links struct {
	st   *store.Store
	c    client.Client
	docs *blobs.Store
}

// connect opens the links. On an error, whatever it opened is closed
// again.
func connect() (links, error) {
	setup, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(config.ClaimsDB())
	if err != nil {
		return links{}, err
	}
	c, err := config.Dial(setup, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		st.Close()
		return links{}, err
	}
	docs, err := blobs.Open(setup, config.Get("BLOB_URL", ""))
	if err != nil {
		c.Close()
		st.Close()
		return links{}, err
	}
	return links{st: st, c: c, docs: docs}, nil
}

func (l links) close() {
	l.docs.Close()
	l.c.Close()
	l.st.Close()
}

// startAll registers and starts every claim, o.concurrency at a time,
// until all are done or stop ends.
func startAll(stop context.Context, o options, l links, claims []namedClaim, inputs []workflows.ClaimInput, stdout, stderr io.Writer) *batch {
	logger := config.Logger("starter")
	b := &batch{out: &lockedWriter{w: stdout}, total: len(inputs), hint: len(inputs) == 1}
	errOut := &lockedWriter{w: stderr}
	one := func(i int) outcome {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		defer cancel()
		in := inputs[i]
		// The claim's trace: its own root, never the batch's, holding its
		// documents' upload, its registration and its start.
		ctx, span := telemetry.Tracer().Start(ctx, "claim.intake", trace.WithAttributes(attribute.String(telemetry.AttrClaimID, in.Claim.ID)))
		defer span.End()
		if err := storeDocuments(ctx, l.docs, &in.Claim, claims[i].root); err != nil {
			fmt.Fprintf(errOut, "%s: %v\n", in.Claim.ID, err)
			return failed
		}
		if o.registerOnly {
			if _, _, err := l.st.PutClaim(ctx, in.Claim); err != nil {
				fmt.Fprintf(errOut, "%s: %v\n", in.Claim.ID, err)
				return outcomeOf(err)
			}
			fmt.Fprintf(b.out, "registered %s, %s %s (not started)\n", in.Claim.ID, in.Claim.Amount(), in.Claim.Currency)
			return registered
		}
		res, err := start(ctx, l.c, l.st, in, o.priority, b.out, b.hint)
		if err != nil {
			logger.Error("start failed", "claim", in.Claim.ID, "error", err)
			fmt.Fprintf(errOut, "%s: %v\n", in.Claim.ID, err)
			return outcomeOf(err)
		}
		return res
	}
	var progress io.Writer
	if len(inputs) >= progressFrom && o.progress > 0 {
		progress = errOut
	}
	b.run(stop, o.concurrency, one, progress, o.progress)
	return b
}

// finish says how the batch went and returns the exit code.
func finish(stop context.Context, b *batch, total int, stdout, stderr io.Writer) int {
	if !b.hint && b.count(started) > 0 {
		fmt.Fprintln(stdout, "  a claim waiting for a decision (claimsctl list --status waiting) is decided with: "+
			"temporal workflow update execute --workflow-id CLAIM --name decide --input \"$(claimsctl receipt approve CLAIM --key YOUR.key)\"")
	}
	if stop.Err() != nil && b.done() < total {
		fmt.Fprintf(stderr, "starter: interrupted after %d of %d claims (%s); run the same command again to go on: claims already started are not started twice\n",
			b.done(), total, b.summary())
		if b.count(conflict) > 0 {
			return exitInvalid
		}
		return exitFailed
	}
	if total >= progressFrom {
		fmt.Fprintf(stderr, "starter: %d claims in %s: %s\n", total, b.elapsed().Round(time.Second), b.summary())
	}
	switch {
	case b.count(conflict) > 0:
		return exitInvalid
	case b.count(failed) > 0:
		return exitFailed
	}
	return exitOK
}

func (o options) input(c claim.Claim) (workflows.ClaimInput, error) {
	in := workflows.ClaimInput{Claim: c, Options: workflows.Options{
		Approval: approvals.Policy{TTL: o.approvalTTL, EscalationTTL: o.escalationTTL, ReminderAt: o.reminderAt,
			FinalOutcome: approvals.Verdict(o.finalOutcome)},
		Caps: workflows.Caps{MaxSteps: o.maxSteps, MaxAge: o.maxAge, MaxTriageTurns: o.maxTurns, MaxTriageTokens: o.maxTokens},
	}}
	switch {
	case o.approvalTTL < 0 || o.escalationTTL < 0:
		return in, fmt.Errorf("--approval-ttl and --escalation-ttl must be positive")
	case o.reminderAt < 0:
		return in, fmt.Errorf("--reminder-at must be a positive fraction of the TTL (1 or more: no reminder)")
	case o.finalOutcome != "" && o.finalOutcome != string(approvals.Reject) && o.finalOutcome != string(approvals.Approve):
		return in, fmt.Errorf("--final-outcome must be reject or approve")
	case o.maxSteps < 0 || o.maxAge < 0:
		return in, fmt.Errorf("--max-steps and --max-age must be positive")
	case o.maxTurns < 0 || o.maxTokens < 0:
		return in, fmt.Errorf("--max-triage-turns and --max-triage-tokens must be positive whole numbers")
	}
	var err error
	if o.maxSpend != "" {
		spend, err := claim.ParseAmount(o.maxSpend, "usd")
		if err != nil {
			return in, fmt.Errorf("--max-model-spend: %v", err)
		}
		in.Options.Caps.MaxModelSpendMicros = spend * 10_000 // cents to micro-dollars
	}
	if c.Currency == "" {
		return in, nil
	}
	if o.autoApprove != "" {
		if in.Options.AutoApproveLimitMinor, err = claim.ParseAmount(o.autoApprove, c.Currency); err != nil {
			return in, fmt.Errorf("--auto-approve: %v", err)
		}
	}
	if o.fourEyes != "" {
		if in.Options.FourEyesAboveMinor, err = claim.ParseAmount(o.fourEyes, c.Currency); err != nil {
			return in, fmt.Errorf("--four-eyes-above: %v", err)
		}
	}
	if o.maxPayout != "" {
		if in.Options.Caps.MaxPayoutMinor, err = claim.ParseAmount(o.maxPayout, c.Currency); err != nil {
			return in, fmt.Errorf("--max-payout: %v", err)
		}
	}
	return in, nil
}

// envInt reads a whole number from the environment; a value that is not one
// is kept as -1, which the checks above refuse by name.
func envInt(key string, def int) int {
	n, err := config.Int(key, def)
	if err != nil {
		return -1
	}
	return n
}

func report(w io.Writer, source string, err error) {
	var verr claim.ValidationError
	if errors.As(err, &verr) {
		for _, fe := range verr {
			fmt.Fprintf(w, "%s: %s: %s\n", source, fe.Field, fe.Reason)
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", source, err)
}

// start registers the claim and starts its workflow, or reports the run that
// already exists for it.
func start(ctx context.Context, c client.Client, st *store.Store, in workflows.ClaimInput, priority int, out io.Writer, hint bool) (outcome, error) {
	id := in.Claim.ID
	if _, _, err := st.PutClaim(ctx, in.Claim); err != nil {
		return failed, err
	}
	// One run per claim, ever: a second start of a running or finished
	// claim is refused by the server and reported here.
	opts := workflows.StartOptions(id)
	opts.Priority = temporal.Priority{PriorityKey: priority}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.WorkflowType, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &already):
		desc, derr := c.DescribeWorkflow(ctx, id, "")
		if derr != nil {
			return failed, derr
		}
		info := desc.RawResponse.GetWorkflowExecutionInfo()
		status := strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
		if info.GetTaskQueue() == workflows.TaskQueue && info.GetType().GetName() == workflows.WorkflowType {
			fmt.Fprintf(out, "%s already exists (run %s, %s); not starting another\n", id, already.RunId, status)
			return existed, nil
		}
		// Someone's own workflow holds the claim's ID: no worker of ours
		// acts for it (the claim belongs to no run of it), but while it
		// runs, the claim cannot start.
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return failed, fmt.Errorf("%s: the workflow ID is held by a foreign run (%s on task queue %q, %s), not a claim workflow of ours; "+
				"nothing started: an operator ends it (temporal workflow terminate --workflow-id %s) and starts the claim again",
				id, info.GetType().GetName(), info.GetTaskQueue(), already.RunId, id)
		}
		opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		run, err := c.ExecuteWorkflow(ctx, opts, workflows.WorkflowType, in)
		if err != nil {
			return failed, err
		}
		fmt.Fprintf(out, "started %s (run %s), %s %s; a foreign run (%s on task queue %q, %s) had used its ID\n", id, run.GetRunID(),
			in.Claim.Amount(), in.Claim.Currency, info.GetType().GetName(), info.GetTaskQueue(), status)
	case err != nil:
		return failed, err
	default:
		fmt.Fprintf(out, "started %s (run %s), %s %s\n", id, run.GetRunID(), in.Claim.Amount(), in.Claim.Currency)
	}
	if !hint {
		return started, nil
	}
	fmt.Fprintf(out, "  if it waits for a decision (claimsctl wait %s --status waiting): temporal workflow update execute --workflow-id %s --name decide --input \"$(claimsctl receipt approve %s --key YOUR.key)\"\n", id, id, id)
	return started, nil
}
