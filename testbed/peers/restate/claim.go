package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	restate "github.com/restatedev/sdk-go"

	"durableclaims.local/peers/killpoint"
)

// Claim is the body of POST /claims and the input of the workflow's run handler.
type Claim struct {
	ClaimID     string   `json:"claim_id"`
	PolicyID    string   `json:"policy_id"`
	Claimant    Claimant `json:"claimant"`
	AmountMinor int64    `json:"amount_minor"`
	Currency    string   `json:"currency"`
	Description string   `json:"description"`
}

type Claimant struct {
	Name          string `json:"name"`
	Email         string `json:"email"`
	StripeAccount string `json:"stripe_account"`
}

// Status is the workflow's "status" state key, what GET /claims/{id} answers, and the
// run handler's output.
type Status struct {
	ClaimID     string `json:"claim_id"`
	Status      string `json:"status"`
	PayoutMinor int64  `json:"payout_minor"`
	TransferID  string `json:"transfer_id"`
}

// Approval is the value of the "approval" durable promise.
type Approval struct {
	Approver string `json:"approver"`
}

type answer struct {
	Raw json.RawMessage `json:"raw"` // the model's content, as it came
}

type assessment struct {
	RecommendedMinor int64 `json:"recommended_minor"`
	NeedsReview      bool  `json:"needs_review"`
}

// config is what the run handler reads from the environment (the contract's variables).
type config struct {
	modelBase, modelKey   string
	stripeBase, stripeKey string
	mailSpool             string
	autoApproveLimit      int64
	approvalTimeout       time.Duration
	kill                  *killpoint.Killer
	httpClient            *http.Client
	db                    *pgxpool.Pool
}

// claims is the Restate Workflow: key = claim ID, "run" does the nine steps once per key,
// "approve" and "status" are shared handlers (docs: develop/go/workflows).
type claims struct{ cfg *config }

const (
	workflowName   = "ClaimWorkflow"
	policyID       = "pol-1001"
	policyCurrency = "usd"
	policyLimit    = int64(1000000)
)

func (c *claims) definition() restate.ServiceDefinition {
	return restate.NewWorkflow(workflowName,
		// A killed endpoint is retried by the server under this policy (Restate >= 1.5):
		// short and flat, so a restarted worker is found within half a second. It
		// overrides the server's default-retry-policy (500ms doubling to 1m, 70
		// attempts, then pause) for this workflow only.
		restate.WithInvocationRetryPolicy(
			restate.WithInitialRetryInterval(50*time.Millisecond),
			restate.WithRetryIntervalFactor(2),
			restate.WithMaxRetryInterval(500*time.Millisecond),
			restate.WithMaxRetryAttempts(100000),
			restate.PauseOnMaxAttempts(),
		),
	).
		Handler("run", restate.NewWorkflowHandler(c.run)).
		Handler("approve", restate.NewWorkflowSharedHandler(c.approve)).
		Handler("status", restate.NewWorkflowSharedHandler(c.status))
}

// approve resolves the workflow's "approval" promise. A second approval (or one for a
// claim already decided) is a no-op, not an error.
func (c *claims) approve(ctx restate.WorkflowSharedContext, a Approval) (restate.Void, error) {
	if err := restate.Promise[Approval](ctx, "approval").Resolve(a); err != nil {
		ctx.Log().Info("approval not delivered", "claim", restate.Key(ctx), "err", err)
	}
	return restate.Void{}, nil
}

// status reads the state the run handler keeps; a zero Status before run has started.
func (c *claims) status(ctx restate.WorkflowSharedContext, _ restate.Void) (Status, error) {
	return restate.Get[Status](ctx, "status")
}

var acctRE = regexp.MustCompile(`^acct_[A-Za-z0-9]+$`)

func (c *claims) run(ctx restate.WorkflowContext, cl Claim) (Status, error) {
	st := Status{ClaimID: restate.Key(ctx), Status: "running"}
	restate.Set(ctx, "status", st)

	// 1. intake (no I/O).
	if err := intake(restate.Key(ctx), cl); err != nil {
		st.Status = "failed"
		return c.finish(ctx, cl, st, nil, nil, err.Error())
	}

	// 2. triage: one model call, journaled.
	claimJSON := claimDoc(cl)
	triage, err := restate.Run(ctx, func(rc restate.RunContext) (answer, error) {
		return c.model(rc, "triage", "You triage insurance claims.", "Claim:\n"+claimJSON)
	}, restate.WithName("triage"))
	if err != nil {
		return c.fail(ctx, cl, st, nil, nil, err)
	}

	// 3. coverage (no I/O).
	if cl.PolicyID != policyID || cl.Currency != policyCurrency {
		st.Status = "rejected"
		return c.finish(ctx, cl, st, triage.Raw, nil, "not covered")
	}
	covered := min(cl.AmountMinor, policyLimit)

	// 4. assess: one model call, journaled.
	coverage, _ := json.Marshal(map[string]any{
		"triage": triage.Raw,
		"coverage": struct {
			PolicyID        string `json:"policy_id"`
			Covered         bool   `json:"covered"`
			Reason          string `json:"reason"`
			Currency        string `json:"currency"`
			ClaimedMinor    int64  `json:"claimed_minor"`
			DeductibleMinor int64  `json:"deductible_minor"`
			LimitMinor      int64  `json:"limit_minor"`
			CoveredMinor    int64  `json:"covered_minor"`
		}{cl.PolicyID, true, "covered in full", cl.Currency, cl.AmountMinor, 0, policyLimit, covered},
	})
	assessed, err := restate.Run(ctx, func(rc restate.RunContext) (answer, error) {
		return c.model(rc, "assessment", "You assess insurance claims.",
			"Claim:\n"+claimJSON+"\nTriage and coverage:\n"+string(coverage))
	}, restate.WithName("assess"))
	if err != nil {
		return c.fail(ctx, cl, st, triage.Raw, nil, err)
	}
	var as assessment
	if err := json.Unmarshal(assessed.Raw, &as); err != nil {
		return c.fail(ctx, cl, st, triage.Raw, assessed.Raw, restate.TerminalErrorf("assessment: %v", err))
	}
	st.PayoutMinor = min(max(as.RecommendedMinor, 0), covered)

	// 5. approval: a durable promise raced with a durable timer.
	if st.PayoutMinor == 0 {
		st.Status = "rejected"
		return c.finish(ctx, cl, st, triage.Raw, assessed.Raw, "zero payout")
	}
	if st.PayoutMinor > c.cfg.autoApproveLimit || as.NeedsReview {
		st.Status = "waiting"
		restate.Set(ctx, "status", st)
		approval := restate.Promise[Approval](ctx, "approval")
		timeout := restate.After(ctx, c.cfg.approvalTimeout, restate.WithName("approval-timeout"))
		first, err := restate.WaitFirst(ctx, approval, timeout)
		if err != nil {
			return st, err
		}
		if first == timeout {
			st.Status = "expired"
			return c.finish(ctx, cl, st, triage.Raw, assessed.Raw, "no approval in "+c.cfg.approvalTimeout.String())
		}
		if _, err := approval.Result(); err != nil {
			return c.fail(ctx, cl, st, triage.Raw, assessed.Raw, err)
		}
		st.Status = "running"
		restate.Set(ctx, "status", st)
	}

	// 6. pay: journaled; at-least-once, hence the Idempotency-Key.
	key := restate.Key(ctx)
	st.TransferID, err = restate.Run(ctx, func(rc restate.RunContext) (string, error) {
		id, err := c.pay(rc, key, cl, st.PayoutMinor)
		if err == nil {
			c.cfg.kill.At("after-pay", key)
		}
		return id, err
	}, restate.WithName("pay"))
	if err != nil {
		return c.fail(ctx, cl, st, triage.Raw, assessed.Raw, err)
	}

	// 7. notify: journaled.
	if _, err := restate.Run(ctx, func(rc restate.RunContext) (restate.Void, error) {
		c.cfg.kill.At("in-notify", key)
		return restate.Void{}, c.notify(key, cl, st)
	}, restate.WithName("notify")); err != nil {
		return c.fail(ctx, cl, st, triage.Raw, assessed.Raw, err)
	}

	st.Status = "paid"
	return c.finish(ctx, cl, st, triage.Raw, assessed.Raw, "")
}

// fail records a terminal error as status failed (a retryable one never gets here:
// restate.Run retries it, and the run handler returns only terminal errors of Run).
func (c *claims) fail(ctx restate.WorkflowContext, cl Claim, st Status, triage, assessed json.RawMessage, err error) (Status, error) {
	st.Status = "failed"
	return c.finish(ctx, cl, st, triage, assessed, err.Error())
}

// finish does steps 8 (close) and 9 (audit), each journaled, then publishes the outcome.
func (c *claims) finish(ctx restate.WorkflowContext, cl Claim, st Status, triage, assessed json.RawMessage, reason string) (Status, error) {
	if _, err := restate.Run(ctx, func(rc restate.RunContext) (restate.Void, error) {
		_, err := c.cfg.db.Exec(rc, `INSERT INTO claims (claim_id, status, payout_minor, transfer_id, closed_at)
			VALUES ($1, $2, $3, $4, now())
			ON CONFLICT (claim_id) DO UPDATE SET status = $2, payout_minor = $3, transfer_id = $4, closed_at = now()`,
			st.ClaimID, st.Status, st.PayoutMinor, st.TransferID)
		return restate.Void{}, err
	}, restate.WithName("close")); err != nil {
		return st, err
	}
	if _, err := restate.Run(ctx, func(rc restate.RunContext) (restate.Void, error) {
		// One audit row per claim: a replayed insert (Run is at-least-once) is a no-op.
		_, err := c.cfg.db.Exec(rc, `INSERT INTO audit (claim_id, outcome, payout_minor, transfer_id, reason, triage, assessment)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (claim_id) DO NOTHING`,
			st.ClaimID, st.Status, st.PayoutMinor, st.TransferID, reason, nullJSON(triage), nullJSON(assessed))
		return restate.Void{}, err
	}, restate.WithName("audit")); err != nil {
		return st, err
	}
	restate.Set(ctx, "status", st)
	return st, nil
}

func nullJSON(j json.RawMessage) any {
	if len(j) == 0 {
		return nil
	}
	return string(j)
}

func intake(key string, cl Claim) error {
	switch {
	case cl.ClaimID == "" || cl.ClaimID != key:
		return errors.New("intake: claim_id missing or not the workflow key")
	case cl.PolicyID == "":
		return errors.New("intake: policy_id missing")
	case !acctRE.MatchString(cl.Claimant.StripeAccount):
		return errors.New("intake: claimant.stripe_account is not an acct_ ID")
	case cl.AmountMinor <= 0:
		return errors.New("intake: amount_minor must be > 0")
	case len(cl.Currency) != 3 || strings.ToLower(cl.Currency) != cl.Currency:
		return errors.New("intake: currency must be a lower-case ISO code")
	}
	return nil
}

// claimDoc is the contract's CLAIM: the claim as the model sees it.
func claimDoc(cl Claim) string {
	b, _ := json.Marshal(struct {
		ClaimID     string   `json:"claim_id"`
		PolicyID    string   `json:"policy_id"`
		Claimant    string   `json:"claimant"`
		AmountMinor int64    `json:"amount_minor"`
		Currency    string   `json:"currency"`
		Description string   `json:"description"`
		Documents   []string `json:"documents"`
	}{cl.ClaimID, cl.PolicyID, cl.Claimant.Name, cl.AmountMinor, cl.Currency, cl.Description, []string{}})
	return string(b)
}

// model makes one chat-completions call. 429 and 5xx are retried (a plain error: Restate
// retries the Run); any other refusal is terminal.
func (c *claims) model(ctx context.Context, schema, system, user string) (answer, error) {
	body, _ := json.Marshal(map[string]any{
		"model": "sim",
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": user},
		},
		"response_format": map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": schema, "schema": map[string]any{"type": "object"}},
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.cfg.modelBase, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return answer{}, restate.ToTerminalError(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.cfg.modelKey)
	resp, err := c.cfg.httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := httpError("model "+schema, resp.StatusCode, data); err != nil {
		return answer{}, err
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 || !json.Valid([]byte(out.Choices[0].Message.Content)) {
		return answer{}, restate.TerminalErrorf("model %s: no JSON answer in %.200s", schema, data)
	}
	return answer{Raw: json.RawMessage(out.Choices[0].Message.Content)}, nil
}

// pay creates the transfer. The Idempotency-Key makes a second attempt (a Run retried
// because the process died before Restate stored the result) return the first transfer.
func (c *claims) pay(ctx context.Context, key string, cl Claim, amount int64) (string, error) {
	form := url.Values{
		"amount":         {strconv.FormatInt(amount, 10)},
		"currency":       {cl.Currency},
		"destination":    {cl.Claimant.StripeAccount},
		"transfer_group": {key},
		"metadata[step]": {"6"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.cfg.stripeBase, "/")+"/v1/transfers", strings.NewReader(form.Encode()))
	if err != nil {
		return "", restate.ToTerminalError(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+c.cfg.stripeKey)
	req.Header.Set("Idempotency-Key", key+":step6")
	resp, err := c.cfg.httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := httpError("transfer", resp.StatusCode, data); err != nil {
		return "", err
	}
	var tr struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &tr); err != nil || tr.ID == "" {
		return "", restate.TerminalErrorf("transfer: no id in %.200s", data)
	}
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		log.Printf("pay %s: the transfer request ran again; stripesim replayed %s", key, tr.ID)
	}
	return tr.ID, nil
}

// httpError: nil for 2xx; retryable for 409 (an idempotent request still in flight),
// 429 and 5xx; terminal otherwise.
func httpError(what string, code int, body []byte) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500:
		return fmt.Errorf("%s: HTTP %d: %.200s", what, code, body)
	default:
		return restate.TerminalErrorf("%s: HTTP %d: %.200s", what, code, body)
	}
}

// notify writes the claimant's e-mail: <claim>.eml, or <claim>.<n>.eml when it exists,
// so a repeated e-mail is visible.
func (c *claims) notify(key string, cl Claim, st Status) error {
	if err := os.MkdirAll(c.cfg.mailSpool, 0o755); err != nil {
		return err
	}
	msg := fmt.Sprintf("To: %s <%s>\r\nSubject: Your claim %s is paid\r\n\r\nDear %s,\r\n\r\nwe have paid %d %s (transfer %s) for your claim %s.\r\n",
		cl.Claimant.Name, cl.Claimant.Email, key, cl.Claimant.Name, st.PayoutMinor, strings.ToUpper(cl.Currency), st.TransferID, key)
	for n := 1; ; n++ {
		name := key + ".eml"
		if n > 1 {
			name = fmt.Sprintf("%s.%d.eml", key, n)
		}
		f, err := os.OpenFile(filepath.Join(c.cfg.mailSpool, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = f.WriteString(msg)
		if err2 := f.Close(); err == nil {
			err = err2
		}
		return err
	}
}
