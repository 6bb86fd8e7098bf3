// Package seed is the seed's nine-step claim as testbed/peers/README.md
// fixes it, apart from any engine: the claim and its answers, intake's
// checks, coverage's arithmetic, the model's two calls, Stripe's transfer,
// the e-mail spool and the peer's own tables. A Go peer wraps these in its
// engine's steps (DBOS's RunAsStep, Temporal's activities); what is the
// engine's (durability, retries, waiting, recovery) stays in the peer. It
// imports nothing of the product.
package seed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// Config is the contract's environment every peer shares.
type Config struct {
	Addr, PGURL          string
	ModelURL, ModelKey   string
	StripeURL, StripeKey string
	MailSpool            string
	LimitMinor           int64
	ApprovalTimeout      time.Duration
}

// FromEnv reads the contract's variables; required names the peer's own
// variables that must be set too.
func FromEnv(required ...string) (Config, error) {
	c := Config{
		Addr:      Getenv("PEER_ADDR", "127.0.0.1:8089"),
		PGURL:     os.Getenv("PG_URL"),
		ModelURL:  os.Getenv("MODEL_BASE_URL"),
		ModelKey:  os.Getenv("MODEL_API_KEY"),
		StripeURL: os.Getenv("STRIPE_API_BASE"),
		StripeKey: os.Getenv("STRIPE_SECRET_KEY"),
		MailSpool: os.Getenv("MAIL_SPOOL"),
	}
	var err error
	if c.LimitMinor, err = strconv.ParseInt(Getenv("AUTO_APPROVE_LIMIT_MINOR", "100000"), 10, 64); err != nil || c.LimitMinor < 0 {
		return c, errors.New("AUTO_APPROVE_LIMIT_MINOR: want a whole number of minor units >= 0")
	}
	if c.ApprovalTimeout, err = time.ParseDuration(Getenv("APPROVAL_TIMEOUT", "24h")); err != nil || c.ApprovalTimeout <= 0 {
		return c, errors.New("APPROVAL_TIMEOUT: want a positive duration")
	}
	for _, name := range append([]string{"PG_URL", "MODEL_BASE_URL", "STRIPE_API_BASE", "STRIPE_SECRET_KEY", "MAIL_SPOOL"}, required...) {
		if os.Getenv(name) == "" {
			return c, fmt.Errorf("%s is required", name)
		}
	}
	return c, os.MkdirAll(c.MailSpool, 0o755)
}

// Getenv is the variable k, or def when it is empty.
func Getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Claim is POST /claims's body.
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

// Approval is what POST /claims/{id}/approve delivers to the claim.
type Approval struct {
	Approver string `json:"approver"`
}

// View is GET /claims/{id}'s answer.
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

// Transfer is Stripe's answer to step 6.
type Transfer struct {
	ID       string `json:"id"`
	Replayed bool   `json:"replayed"`
}

var (
	currencyRE = regexp.MustCompile(`^[a-z]{3}$`)
	accountRE  = regexp.MustCompile(`^acct_[A-Za-z0-9]+$`)
)

// Validate is step 1, intake.
func (c Claim) Validate() error {
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

// Prompt is CLAIM of the contract: the claim as the model sees it.
func (c Claim) Prompt() string {
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

// Cover is step 3: policy pol-1001 pays in usd up to 10,000.00 with no
// deductible.
func Cover(c Claim) Coverage {
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

// Payout is what step 4's answer pays: the recommendation, clamped to
// what the policy covers.
func Payout(a Assessment, cov Coverage) int64 {
	return min(max(a.RecommendedMinor, 0), cov.CoveredMinor)
}

// PermanentError is a refusal that asking again cannot change (a 4xx, an
// answer that is not the JSON asked for): the peer fails the claim; any
// other error is transient and retried by the engine's policy.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

func permanent(err error) error { return &PermanentError{err} }

// IsPermanent says whether err is a PermanentError.
func IsPermanent(err error) bool { return errors.As(err, new(*PermanentError)) }

// World is the outside world of steps 2, 4, 6 and 7: modelsim, stripesim
// and the mail spool.
type World struct {
	Config Config
	HTTP   *http.Client
}

// Triage is step 2: one model call.
func (w *World) Triage(ctx context.Context, c Claim) (Triage, error) {
	var t Triage
	if err := w.chat(ctx, "triage", "You triage insurance claims.", "Claim:\n"+c.Prompt(), &t); err != nil {
		return t, err
	}
	if t.Category == "" || t.FraudScore < 0 || t.FraudScore > 100 {
		return t, permanent(fmt.Errorf("triage answer breaks the schema: %+v", t))
	}
	if t.FraudSignals == nil {
		t.FraudSignals = []string{}
	}
	return t, nil
}

// Assess is step 4: one model call, shown the triage and the coverage.
func (w *World) Assess(ctx context.Context, c Claim, t Triage, cov Coverage) (Assessment, error) {
	tc, err := json.Marshal(struct {
		Triage   Triage   `json:"triage"`
		Coverage Coverage `json:"coverage"`
	}{t, cov})
	if err != nil {
		return Assessment{}, permanent(err)
	}
	var a Assessment
	err = w.chat(ctx, "assessment", "You assess insurance claims.", "Claim:\n"+c.Prompt()+"\nTriage and coverage:\n"+string(tc), &a)
	return a, err
}

// chat makes one OpenAI-compatible chat completion whose answer is JSON.
func (w *World) chat(ctx context.Context, schema, system, user string, out any) error {
	body, err := json.Marshal(map[string]any{
		"model":    "sim",
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}},
		"response_format": map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": schema, "schema": map[string]any{"type": "object"}}},
	})
	if err != nil {
		return permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.Config.ModelURL, "/")+"/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.Config.ModelKey)
	raw, _, err := w.send(req)
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
		return fmt.Errorf("%s: malformed completion: %s", schema, clip(raw))
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), out); err != nil {
		return permanent(fmt.Errorf("%s: the answer is not the JSON asked for: %w", schema, err))
	}
	return nil
}

// Pay is step 6: the transfer. Every engine runs a step at least once (a
// crash after the POST and before the engine records the answer runs it
// again), so the request carries Stripe's Idempotency-Key: a second POST
// replays the first answer (Replayed).
func (w *World) Pay(ctx context.Context, c Claim, amount int64) (Transfer, error) {
	form := url.Values{
		"amount":         {strconv.FormatInt(amount, 10)},
		"currency":       {c.Currency},
		"destination":    {c.Claimant.StripeAccount},
		"transfer_group": {c.ClaimID},
		"metadata[step]": {"6"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(w.Config.StripeURL, "/")+"/v1/transfers", strings.NewReader(form.Encode()))
	if err != nil {
		return Transfer{}, permanent(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+w.Config.StripeKey)
	req.Header.Set("Idempotency-Key", c.ClaimID+":step6")
	raw, h, err := w.send(req)
	if err != nil {
		return Transfer{}, err
	}
	var t Transfer
	if err := json.Unmarshal(raw, &t); err != nil || t.ID == "" {
		return Transfer{}, fmt.Errorf("malformed transfer: %s", clip(raw))
	}
	t.Replayed = h.Get("Idempotent-Replayed") == "true"
	return t, nil
}

// send sends req and reads a 2xx body and its headers. A network error,
// 409, 429 or 5xx is transient; any other status is permanent.
func (w *World) send(req *http.Request) ([]byte, http.Header, error) {
	resp, err := w.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, clip(raw))
		if resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return nil, nil, err
		}
		return nil, nil, permanent(err)
	}
	return raw, resp.Header, nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// Notify is step 7: the claimant's e-mail written to the spool as
// <claim>.eml, then <claim>.2.eml... if the step runs again, so a repeat
// is visible. It returns the file's path.
func (w *World) Notify(c Claim, v View, approver string) (string, error) {
	var msg strings.Builder
	fmt.Fprintf(&msg, "To: %s <%s>\r\nSubject: Your claim %s: %s\r\n\r\n", c.Claimant.Name, c.Claimant.Email, c.ClaimID, v.Status)
	fmt.Fprintf(&msg, "Dear %s,\r\n\r\nyour claim %s is %s.\r\n", c.Claimant.Name, c.ClaimID, v.Status)
	if v.Status == StatusPaid {
		fmt.Fprintf(&msg, "We paid %d.%02d %s (transfer %s).\r\n", v.PayoutMinor/100, v.PayoutMinor%100, strings.ToUpper(c.Currency), v.TransferID)
	}
	if approver != "" {
		fmt.Fprintf(&msg, "Approved by %s.\r\n", approver)
	}
	name := filepath.Base(c.ClaimID)
	for n := 1; ; n++ {
		path := filepath.Join(w.Config.MailSpool, name+".eml")
		if n > 1 {
			path = filepath.Join(w.Config.MailSpool, fmt.Sprintf("%s.%d.eml", name, n))
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err = f.WriteString(msg.String()); err == nil {
			err = f.Sync()
		}
		return path, errors.Join(err, f.Close())
	}
}

// Close is step 8: the claim's row, upserted, so a repeat writes the same.
func Close(ctx context.Context, db *pgxpool.Pool, v View) error {
	_, err := db.Exec(ctx, `INSERT INTO claims (claim_id, status, payout_minor, transfer_id, closed_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (claim_id) DO UPDATE SET status = $2, payout_minor = $3, transfer_id = $4, closed_at = now()`,
		v.ClaimID, v.Status, v.PayoutMinor, v.TransferID)
	return err
}

// Audit is step 9: one row a claim, so a repeat inserts nothing.
func Audit(ctx context.Context, db *pgxpool.Pool, v View, approver string, t Triage, a Assessment) error {
	tj, err := json.Marshal(t)
	if err != nil {
		return permanent(err)
	}
	aj, err := json.Marshal(a)
	if err != nil {
		return permanent(err)
	}
	_, err = db.Exec(ctx, `INSERT INTO claim_audit (claim_id, outcome, payout_minor, transfer_id, approver, triage, assessment)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (claim_id) DO NOTHING`,
		v.ClaimID, v.Status, v.PayoutMinor, v.TransferID, approver, string(tj), string(aj))
	return err
}

// OpenDB opens the peer's database at url and makes its own tables
// (steps 8 and 9) if absent.
func OpenDB(ctx context.Context, url string) (*pgxpool.Pool, error) {
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := createTables(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("create tables: %w", err)
	}
	return db, nil
}

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
