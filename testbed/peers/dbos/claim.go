package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"durableclaims.local/peers/killpoint"
)

// The statuses of GET /claims/{id}.
const (
	StatusRunning  = "running"
	StatusWaiting  = "waiting"
	StatusPaid     = "paid"
	StatusRejected = "rejected"
	StatusExpired  = "expired"
	StatusFailed   = "failed"
)

const (
	statusEvent   = "status"   // dbos.SetEvent key the control API reads
	approvalTopic = "approval" // dbos.Send / dbos.Recv topic
)

// Claim is POST /claims's body and the workflow's input.
type Claim struct {
	ClaimID  string `json:"claim_id"`
	PolicyID string `json:"policy_id"`
	Claimant struct {
		Name          string `json:"name"`
		Email         string `json:"email"`
		StripeAccount string `json:"stripe_account"`
	} `json:"claimant"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
}

// Approval is the message POST /claims/{id}/approve sends to the claim.
type Approval struct {
	Approver string `json:"approver"`
}

// View is the status event, and GET /claims/{id}'s answer.
type View struct {
	ClaimID     string `json:"claim_id"`
	Status      string `json:"status"`
	PayoutMinor int64  `json:"payout_minor"`
	TransferID  string `json:"transfer_id"`
}

// Triage and Assessment are the two model answers.
type Triage struct {
	Category     string   `json:"category"`
	Severity     string   `json:"severity"`
	FraudSignals []string `json:"fraud_signals"`
	FraudScore   int      `json:"fraud_score"`
	Summary      string   `json:"summary"`
}

type Assessment struct {
	RecommendedMinor int64  `json:"recommended_minor"`
	Rationale        string `json:"rationale"`
	NeedsReview      bool   `json:"needs_review"`
}

// Coverage is step 3's arithmetic, in the shape the assessment prompt shows.
type Coverage struct {
	PolicyID        string `json:"policy_id"`
	Covered         bool   `json:"covered"`
	Reason          string `json:"reason"`
	Currency        string `json:"currency"`
	ClaimedMinor    int64  `json:"claimed_minor"`
	DeductibleMinor int64  `json:"deductible_minor"`
	LimitMinor      int64  `json:"limit_minor"`
	CoveredMinor    int64  `json:"covered_minor"`
}

type Transfer struct {
	ID       string `json:"id"`
	Replayed bool   `json:"replayed"`
}

type peer struct {
	cfg  config
	db   *pgxpool.Pool
	http *http.Client
	log  *slog.Logger
	kill *killpoint.Killer
}

// Steps retry transient failures (network, 429, 5xx) with backoff; a
// permanent error (a 4xx refusal, a malformed answer) fails the claim.
var retry = []dbos.StepOption{
	dbos.WithStepMaxRetries(8),
	dbos.WithStepBaseInterval(250 * time.Millisecond),
	dbos.WithStepMaxInterval(5 * time.Second),
	dbos.WithStepRetryPredicate(func(err error) bool { return !errors.As(err, new(*permanentError)) }),
}

func step(name string) []dbos.StepOption {
	return append([]dbos.StepOption{dbos.WithStepName(name)}, retry...)
}

// claimWorkflow is the claim: a DBOS workflow whose ID is the claim ID.
// Its code between steps is deterministic, so recovery replays the
// recorded step results and resumes at the first step with none.
func (p *peer) claimWorkflow(ctx dbos.Context, c Claim) (View, error) {
	if err := dbos.SetEvent(ctx, statusEvent, View{ClaimID: c.ClaimID, Status: StatusRunning}); err != nil {
		return View{}, err
	}

	// 1. Intake (no I/O: validation only, recomputed on replay).
	if err := c.validate(); err != nil {
		return View{}, fmt.Errorf("intake: %w", err)
	}

	// 2. Triage: one model call.
	triage, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Triage, error) {
		var t Triage
		err := p.chat(sctx, "triage", "You triage insurance claims.", "Claim:\n"+c.prompt(), &t)
		if err == nil && (t.Category == "" || t.FraudScore < 0 || t.FraudScore > 100) {
			err = permanent(fmt.Errorf("triage answer breaks the schema: %+v", t))
		}
		if t.FraudSignals == nil {
			t.FraudSignals = []string{}
		}
		return t, err
	}, step("triage")...)
	if err != nil {
		return View{}, err
	}

	// 3. Coverage (no I/O).
	cov := cover(c)

	// 4. Assess: one model call; the rules clamp the recommendation.
	assess, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Assessment, error) {
		tc, _ := json.Marshal(struct {
			Triage   Triage   `json:"triage"`
			Coverage Coverage `json:"coverage"`
		}{triage, cov})
		var a Assessment
		err := p.chat(sctx, "assessment", "You assess insurance claims.",
			"Claim:\n"+c.prompt()+"\nTriage and coverage:\n"+string(tc), &a)
		return a, err
	}, step("assess")...)
	if err != nil {
		return View{}, err
	}
	payout := min(max(assess.RecommendedMinor, 0), cov.CoveredMinor)

	// 5. Approval: above the limit, or on the model's say-so, a human
	// decides; the claim waits in a durable Recv whose deadline is recorded,
	// so a restart waits only for what is left of APPROVAL_TIMEOUT.
	out := View{ClaimID: c.ClaimID, PayoutMinor: payout}
	approver := ""
	switch {
	case payout == 0:
		out.Status = StatusRejected
	case payout > p.cfg.limitMinor || assess.NeedsReview:
		if err := dbos.SetEvent(ctx, statusEvent, View{ClaimID: c.ClaimID, Status: StatusWaiting, PayoutMinor: payout}); err != nil {
			return View{}, err
		}
		a, err := dbos.Recv[Approval](ctx, approvalTopic, p.cfg.approvalTimeout)
		switch {
		case errors.Is(err, dbos.ErrTimeout):
			out.Status = StatusExpired
		case err != nil:
			return View{}, err
		default:
			approver = a.Approver
			if err := dbos.SetEvent(ctx, statusEvent, View{ClaimID: c.ClaimID, Status: StatusRunning, PayoutMinor: payout}); err != nil {
				return View{}, err
			}
		}
	}

	// 6. Pay.
	if out.Status == "" {
		tr, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Transfer, error) {
			return p.pay(sctx, c, payout)
		}, step("pay")...)
		if err != nil {
			return View{}, err
		}
		out.Status, out.TransferID = StatusPaid, tr.ID
	} else {
		out.PayoutMinor = 0
	}

	// 7. Notify.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
		p.kill.At("in-notify", c.ClaimID)
		return p.notify(c, out, approver)
	}, step("notify")...); err != nil {
		return View{}, err
	}

	// 8. Close.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		_, err := p.db.Exec(sctx, `INSERT INTO claims (claim_id, status, payout_minor, transfer_id, closed_at)
			VALUES ($1, $2, $3, $4, now())
			ON CONFLICT (claim_id) DO UPDATE SET status = $2, payout_minor = $3, transfer_id = $4, closed_at = now()`,
			c.ClaimID, out.Status, out.PayoutMinor, out.TransferID)
		return true, err
	}, step("close")...); err != nil {
		return View{}, err
	}

	// 9. Audit: one row per claim, so a repeated step inserts nothing.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		t, _ := json.Marshal(triage)
		a, _ := json.Marshal(assess)
		_, err := p.db.Exec(sctx, `INSERT INTO claim_audit (claim_id, outcome, payout_minor, transfer_id, approver, triage, assessment)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (claim_id) DO NOTHING`,
			c.ClaimID, out.Status, out.PayoutMinor, out.TransferID, approver, string(t), string(a))
		return true, err
	}, step("audit")...); err != nil {
		return View{}, err
	}

	return out, dbos.SetEvent(ctx, statusEvent, out)
}

var (
	currencyRE = regexp.MustCompile(`^[a-z]{3}$`)
	accountRE  = regexp.MustCompile(`^acct_[A-Za-z0-9]+$`)
)

func (c Claim) validate() error {
	switch {
	case c.ClaimID == "":
		return errors.New("no claim_id")
	case c.PolicyID == "":
		return errors.New("no policy_id")
	case !accountRE.MatchString(c.Claimant.StripeAccount):
		return fmt.Errorf("claimant's stripe_account %q is not an acct_ ID", c.Claimant.StripeAccount)
	case c.AmountMinor <= 0:
		return fmt.Errorf("amount_minor %d is not > 0", c.AmountMinor)
	case !currencyRE.MatchString(c.Currency):
		return fmt.Errorf("currency %q is not a lower-case ISO code", c.Currency)
	}
	return nil
}

// prompt is CLAIM of the README: the claim as the model sees it.
func (c Claim) prompt() string {
	b, _ := json.Marshal(struct {
		ClaimID     string   `json:"claim_id"`
		PolicyID    string   `json:"policy_id"`
		Claimant    string   `json:"claimant"`
		AmountMinor int64    `json:"amount_minor"`
		Currency    string   `json:"currency"`
		Description string   `json:"description"`
		Documents   []string `json:"documents"`
	}{c.ClaimID, c.PolicyID, c.Claimant.Name, c.AmountMinor, c.Currency, c.Description, []string{}})
	return string(b)
}

// cover: policy pol-1001 pays in usd up to 10,000.00 with no deductible.
func cover(c Claim) Coverage {
	const limit = 1_000_000
	cov := Coverage{PolicyID: c.PolicyID, Currency: c.Currency, ClaimedMinor: c.AmountMinor, LimitMinor: limit}
	switch {
	case c.PolicyID != "pol-1001":
		cov.Reason = "unknown policy"
	case c.Currency != "usd":
		cov.Reason = "the policy pays in usd only"
	default:
		cov.Covered, cov.Reason, cov.CoveredMinor = true, "covered in full", min(c.AmountMinor, limit)
	}
	return cov
}

// chat makes one OpenAI-compatible chat completion with a JSON answer.
func (p *peer) chat(ctx context.Context, schema, system, user string, out any) error {
	body, _ := json.Marshal(map[string]any{
		"model": "sim",
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": user},
		},
		"response_format": map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": schema, "schema": map[string]any{"type": "object"}}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.cfg.modelURL, "/")+"/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.cfg.modelKey)
	raw, err := p.do(req)
	if err != nil {
		return err
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || len(resp.Choices) == 0 {
		return fmt.Errorf("%s: malformed completion: %s", schema, truncate(raw))
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), out); err != nil {
		return permanent(fmt.Errorf("%s: answer is not the JSON asked for: %v", schema, err))
	}
	return nil
}

// pay creates the transfer. DBOS steps are at-least-once (a crash after
// the POST and before the step's checkpoint runs it again), so the request
// carries Stripe's Idempotency-Key: a second POST replays the first answer.
func (p *peer) pay(ctx context.Context, c Claim, amount int64) (Transfer, error) {
	form := url.Values{
		"amount":         {strconv.FormatInt(amount, 10)},
		"currency":       {c.Currency},
		"destination":    {c.Claimant.StripeAccount},
		"transfer_group": {c.ClaimID},
		"metadata[step]": {"6"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.cfg.stripeURL, "/")+"/v1/transfers", strings.NewReader(form.Encode()))
	if err != nil {
		return Transfer{}, permanent(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+p.cfg.stripeKey)
	req.Header.Set("Idempotency-Key", c.ClaimID+":step6")
	var replayed bool
	raw, err := p.doHeader(req, func(h http.Header) { replayed = h.Get("Idempotent-Replayed") == "true" })
	if err != nil {
		return Transfer{}, err
	}
	var t Transfer
	if err := json.Unmarshal(raw, &t); err != nil || t.ID == "" {
		return Transfer{}, fmt.Errorf("malformed transfer: %s", truncate(raw))
	}
	t.Replayed = replayed
	// Kill point: the transfer exists, the step has not returned, so DBOS
	// has not recorded it.
	p.kill.At("after-pay", c.ClaimID)
	return t, nil
}

// notify writes the claimant's e-mail to the spool: <claim>.eml, then
// <claim>.2.eml, <claim>.3.eml... if the step runs again.
func (p *peer) notify(c Claim, v View, approver string) (string, error) {
	var msg strings.Builder
	fmt.Fprintf(&msg, "To: %s <%s>\r\nSubject: Your claim %s: %s\r\n\r\n", c.Claimant.Name, c.Claimant.Email, c.ClaimID, v.Status)
	fmt.Fprintf(&msg, "Dear %s,\r\n\r\nyour claim %s is %s.\r\n", c.Claimant.Name, c.ClaimID, v.Status)
	if v.Status == StatusPaid {
		fmt.Fprintf(&msg, "We paid %d.%02d %s (transfer %s).\r\n", v.PayoutMinor/100, v.PayoutMinor%100, strings.ToUpper(c.Currency), v.TransferID)
	}
	if approver != "" {
		fmt.Fprintf(&msg, "Approved by %s.\r\n", approver)
	}
	for n := 1; ; n++ {
		name := c.ClaimID + ".eml"
		if n > 1 {
			name = fmt.Sprintf("%s.%d.eml", c.ClaimID, n)
		}
		path := filepath.Join(p.cfg.mailSpool, filepath.Base(name))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(msg.String())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return path, err
	}
}

func (p *peer) do(req *http.Request) ([]byte, error) { return p.doHeader(req, nil) }

// doHeader sends req and reads a 2xx body. Network errors, 409, 429 and
// 5xx are transient (the step retries); any other status is permanent.
func (p *peer) doHeader(req *http.Request, onHeader func(http.Header)) ([]byte, error) {
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, truncate(raw))
		if resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return nil, err
		}
		return nil, permanent(err)
	}
	if onHeader != nil {
		onHeader(resp.Header)
	}
	return raw, nil
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// createTables makes the peer's own tables (steps 8 and 9) if absent.
func createTables(ctx context.Context, db *pgxpool.Pool) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := db.Exec(cctx, `
CREATE TABLE IF NOT EXISTS claims (
	claim_id     text PRIMARY KEY,
	status       text NOT NULL,
	payout_minor bigint NOT NULL,
	transfer_id  text NOT NULL,
	closed_at    timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS claim_audit (
	claim_id     text PRIMARY KEY,
	outcome      text NOT NULL,
	payout_minor bigint NOT NULL,
	transfer_id  text NOT NULL,
	approver     text NOT NULL,
	triage       jsonb NOT NULL,
	assessment   jsonb NOT NULL,
	recorded_at  timestamptz NOT NULL DEFAULT now()
)`)
	return err
}
