package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Email is one message. MessageID is derived from the idempotency key, so a
// message sent twice through a crash window is the same message to every
// mail system that deduplicates by Message-ID.
type Email struct {
	MessageID string
	From, To  string
	Subject   string
	Body      string
}

// Mailer delivers e-mail. E-mail has no idempotency of its own; the outbox in
// the store makes sending check-then-act.
type Mailer interface {
	Send(ctx context.Context, m Email) error
}

// A Finder is a mailer that can say whether it already holds a message, by
// its Message-ID: the receiver's own check, asked before sending again a
// message an earlier attempt reserved and may have sent before the outbox
// recorded it (a crash, or the store out of reach, between the two). An
// SMTP relay cannot be asked: there a receiving system deduplicates by the
// same Message-ID.
type Finder interface {
	Has(ctx context.Context, messageID string) (bool, error)
}

// SpoolMailer writes each message as an RFC 5322 file named by its
// Message-ID: a local mail drop for the demo and tests. Writing the same
// message again replaces the file, so the spool never holds a duplicate.
type SpoolMailer struct{ Dir string }

// Send writes the message atomically (temporary file, then rename), owner
// only: it holds a claimant's name, address and outcome.
func (s SpoolMailer) Send(_ context.Context, m Email) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	name := filepath.Join(s.Dir, fileSafe(m.MessageID)+".eml")
	tmp, err := os.CreateTemp(s.Dir, ".sending-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(render(m)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// Has reports whether the spool holds the message.
func (s SpoolMailer) Has(_ context.Context, messageID string) (bool, error) {
	_, err := os.Stat(filepath.Join(s.Dir, fileSafe(messageID)+".eml"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SMTPMailer sends through an SMTP relay (SMTP_ADDR).
type SMTPMailer struct {
	Addr string
	Auth smtp.Auth
}

// Send hands the message to the relay.
func (s SMTPMailer) Send(_ context.Context, m Email) error {
	return smtp.SendMail(s.Addr, s.Auth, m.From, []string{m.To}, []byte(render(m)))
}

func render(m Email) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Message-ID: <%s>\r\nFrom: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		m.MessageID, m.From, m.To, m.Subject, time.Now().UTC().Format(time.RFC1123Z))
	b.WriteString(strings.ReplaceAll(m.Body, "\n", "\r\n"))
	b.WriteString("\r\n")
	return b.String()
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' || r == '@' {
			return r
		}
		return '_'
	}, s)
}

// messageID makes a Message-ID from an idempotency key.
func messageID(key claim.IdempotencyKey) string {
	return strings.ReplaceAll(string(key), ":", ".") + "@durableclaims"
}

// NotifyInput is step 7's input.
type NotifyInput struct {
	Key         claim.IdempotencyKey `json:"key"`
	ClaimID     string               `json:"claim_id"`
	To          string               `json:"to"`
	Name        string               `json:"name"`
	Outcome     string               `json:"outcome"`
	PayoutMinor int64                `json:"payout_minor"`
	Currency    string               `json:"currency"`
	TransferID  string               `json:"transfer_id,omitempty"`
	Reason      string               `json:"reason,omitempty"`
	// Letter, where a jurisdiction's rules apply, makes the e-mail the
	// decision letter (approval, partial or denial) these facts describe.
	Letter *LetterFacts `json:"letter,omitempty"`
}

// NotifyResult says which message was sent and whether it already had been.
type NotifyResult struct {
	MessageID string `json:"message_id"`
	Replayed  bool   `json:"replayed"`
	// Letter is the decision letter sent, when the input asked for one.
	Letter *SentLetter `json:"letter,omitempty"`
	Meta
}

// NotifyClaimant is step 7: tell the claimant the outcome, once. The
// e-mail says what the claimant needs to know and nothing of how we got
// there: no approver's name, no model rationale, no fraud reasons (the
// input's Reason is for the audit, never the e-mail). It goes to the
// claimant the system of record holds, for the run that owns the claim,
// and says only an outcome whose facts hold (outcomeHolds).
func (a *Activities) NotifyClaimant(ctx context.Context, in NotifyInput) (NotifyResult, error) {
	if err := requireKey(in.Key); err != nil {
		return NotifyResult{}, err
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return NotifyResult{}, err
	}
	if err := a.outcomeHolds(ctx, c, rec, in.Outcome, in.TransferID, in.PayoutMinor); err != nil {
		return NotifyResult{}, err
	}
	if in.Letter != nil {
		if err := checkDecisionLetter(in, rec.Claim); err != nil {
			return NotifyResult{}, err
		}
		sent, replayed, err := a.sendLetter(ctx, in.Key, rec, *in.Letter)
		if err != nil {
			return NotifyResult{}, err
		}
		return NotifyResult{MessageID: sent.MessageID, Replayed: replayed, Letter: &sent, Meta: meta(ctx)}, nil
	}
	in.To, in.Name, in.Currency = rec.Claim.Claimant.Email, rec.Claim.Claimant.Name, rec.Claim.Currency
	subject := fmt.Sprintf("Your claim %s: %s", in.ClaimID, in.Outcome)
	return a.sendOnce(ctx, in.Key, in.ClaimID, Email{To: in.To, Subject: subject, Body: claimantLetter(in)})
}

// claimantLetter is the claimant's e-mail: the outcome, and what to do next.
func claimantLetter(in NotifyInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dear %s,\n\n", in.Name)
	switch in.Outcome {
	case "paid":
		fmt.Fprintf(&b, "Your claim %s is paid: we have paid %s %s (transfer %s).\n", in.ClaimID,
			claim.FormatAmount(in.PayoutMinor, in.Currency), strings.ToUpper(in.Currency), in.TransferID)
	case "withdrawn":
		fmt.Fprintf(&b, "Your claim %s is withdrawn, as asked. Nothing was paid.\n", in.ClaimID)
	case "expired":
		fmt.Fprintf(&b, "We could not complete the review of your claim %s in time, so it is closed without payment.\n", in.ClaimID)
	default:
		fmt.Fprintf(&b, "We are unable to pay your claim %s.\n", in.ClaimID)
	}
	if in.Outcome != "paid" && in.Outcome != "withdrawn" {
		b.WriteString("If you think this is wrong, reply to this e-mail quoting your claim number and we will look at it again.\n")
	}
	return b.String()
}

// NoticeInput describes a pending approval for a reminder or an escalation.
type NoticeInput struct {
	Key           claim.IdempotencyKey `json:"key"`
	ClaimID       string               `json:"claim_id"`
	Amount        string               `json:"amount"`
	Currency      string               `json:"currency"`
	RequestSHA256 string               `json:"request_sha256"`
	Deadline      time.Time            `json:"deadline"`
}

// RemindApprovers nudges the adjusters' queue about a claim still waiting
// at the reminder point of its TTL, once.
func (a *Activities) RemindApprovers(ctx context.Context, in NoticeInput) (NotifyResult, error) {
	subject := fmt.Sprintf("Reminder: claim %s awaits a decision", in.ClaimID)
	return a.approvalNotice(ctx, in, a.Adjusters, subject, "is still waiting for a decision")
}

// EscalateApproval tells the supervisors' queue that a claim's approval
// passed its deadline, once.
func (a *Activities) EscalateApproval(ctx context.Context, in NoticeInput) (NotifyResult, error) {
	subject := fmt.Sprintf("Escalated: claim %s awaits a supervisor", in.ClaimID)
	return a.approvalNotice(ctx, in, a.Supervisors, subject, "was not decided in time and is escalated to supervisors")
}

// OverdueApproval tells the supervisors' queue that nobody decided a claim
// by its second deadline and that it is held for them, never decided by
// silence, once.
func (a *Activities) OverdueApproval(ctx context.Context, in NoticeInput) (NotifyResult, error) {
	subject := fmt.Sprintf("Overdue: claim %s awaits a supervisor's decision", in.ClaimID)
	return a.approvalNotice(ctx, in, a.Supervisors, subject,
		"passed its escalation deadline with no decision; it is held for a supervisor, never decided by silence")
}

// approvalNotice goes to the insurer's own queues, for the run that owns a
// claim still open.
func (a *Activities) approvalNotice(ctx context.Context, in NoticeInput, to, subject, what string) (NotifyResult, error) {
	if err := requireKey(in.Key); err != nil {
		return NotifyResult{}, err
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return NotifyResult{}, err
	}
	if rec.Closed() || rec.Status != store.StatusOpen || !in.Key.Within(claim.StepKey(in.ClaimID, claim.StepApproval)) {
		return NotifyResult{}, a.refuse(ctx, c, in.ClaimID, "not-waiting", ErrForeignRun, "claim %s is %s: no approval notice under %s", in.ClaimID, rec.Status, in.Key)
	}
	body := fmt.Sprintf("Claim %s (%s %s) %s.\nRequest sha256: %s\nDeadline: %s\n\n", in.ClaimID, in.Amount,
		strings.ToUpper(in.Currency), what, in.RequestSHA256, in.Deadline.Format(time.RFC3339))
	if a.InboxURL != "" {
		body += fmt.Sprintf("Open it in the inbox: %s/claims/%s\n\n", strings.TrimSuffix(a.InboxURL, "/"), url.PathEscape(in.ClaimID))
	}
	body += fmt.Sprintf("Or decide with your signing key: temporal workflow signal --workflow-id %s --name approve "+
		"--input \"$(claimsctl receipt approve %s --key YOUR.key)\" (or reject, with --reason)\n", in.ClaimID, in.ClaimID)
	return a.sendOnce(ctx, in.Key, in.ClaimID, Email{To: to, Subject: subject, Body: body})
}

// sendOnce is check-then-act over the outbox: look the message up by key,
// send only if it was not sent, then record it sent.
func (a *Activities) sendOnce(ctx context.Context, key claim.IdempotencyKey, claimID string, m Email) (NotifyResult, error) {
	m.MessageID, m.From = messageID(key), a.From
	if m.To == "" {
		return NotifyResult{}, invalid("message %s has no recipient", key)
	}
	rec, err := a.reserve(ctx, key, claimID, m)
	if err != nil {
		return NotifyResult{}, err
	}
	if rec.Status == store.OutboxSent {
		return NotifyResult{MessageID: rec.MessageID, Replayed: true, Meta: meta(ctx)}, nil
	}
	if sent, err := a.sentBefore(ctx, rec); err != nil {
		return NotifyResult{}, err
	} else if sent {
		return NotifyResult{MessageID: rec.MessageID, Replayed: true, Meta: meta(ctx)}, nil
	}
	if err := a.deliver(ctx, key, m); err != nil {
		return NotifyResult{}, err
	}
	return NotifyResult{MessageID: m.MessageID, Meta: meta(ctx)}, nil
}

// reserve is the check of check-then-act: the outbox's record of key,
// which says whether the message was already sent.
func (a *Activities) reserve(ctx context.Context, key claim.IdempotencyKey, claimID string, m Email) (store.Message, error) {
	rec, err := a.Store.ReserveMessage(ctx, store.Message{Key: key, ClaimID: claimID, Recipient: m.To, Subject: m.Subject, MessageID: m.MessageID})
	if errors.Is(err, store.ErrConflict) {
		logger(ctx).Error("ALERT: outbox key reused for another message", "alert", "idempotency_conflict", "tool", metrics.ToolEmail, "key", key)
		metrics.Activity(ctx, metrics.IdempotencyConflicts, map[string]string{"tool": metrics.ToolEmail})
		return rec, nonRetryable(err, ErrIdempotencyConflict)
	}
	if err != nil {
		return rec, err
	}
	if rec.Status == store.OutboxSent {
		logger(ctx).Info("message already sent under this key", "key", key, "message_id", rec.MessageID)
		metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolEmail, "by": "lookup"})
	}
	return rec, nil
}

// sentBefore asks the mailer, when it can be asked, whether an earlier
// attempt of a message the outbox has not recorded sent did send it; if
// so it records it sent.
func (a *Activities) sentBefore(ctx context.Context, rec store.Message) (bool, error) {
	f, ok := a.Mailer.(Finder)
	if !ok || rec.Attempts < 2 {
		return false, nil
	}
	has, err := f.Has(ctx, rec.MessageID)
	if err != nil || !has {
		return false, err
	}
	if err := a.Store.MarkSent(ctx, rec.Key); err != nil {
		return false, err
	}
	logger(ctx).Info("message found at the receiver; recorded sent", "key", rec.Key, "message_id", rec.MessageID)
	metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolEmail, "by": "receiver"})
	return true, nil
}

// deliver is the act and its record: hand the message to the mailer, then
// mark its key sent.
func (a *Activities) deliver(ctx context.Context, key claim.IdempotencyKey, m Email) error {
	if err := ctx.Err(); err != nil {
		// The attempt was given up (its lease ran out, worker/heartbeat)
		// or ended: a mailer that does not watch the context must not send.
		return fmt.Errorf("send %s: %w", key, context.Cause(ctx))
	}
	sctx, span := traceSend(ctx, key, m.MessageID)
	err := a.Mailer.Send(sctx, m)
	telemetry.End(span, err, "not sent")
	if err != nil {
		return fmt.Errorf("send %s: %w", key, err)
	}
	if err := a.Store.MarkSent(ctx, key); err != nil {
		return err
	}
	logger(ctx).Info("message sent", "key", key, "message_id", m.MessageID)
	return nil
}
