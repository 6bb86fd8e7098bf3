// Package refusals records decide updates that the validator refused. Such
// a refusal is answered to the caller and never enters the workflow's
// history, so the worker writes it to the claims store instead: the audit
// trail then holds every attempt, by signal or update, accepted or not.
package refusals

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Recorder writes refusals to the store off the workflow's thread: a
// workflow task must not wait on a database.
type Recorder struct {
	interceptor.WorkerInterceptorBase
	st   *store.Store
	log  *slog.Logger
	ch   chan store.Refusal
	done chan struct{}
}

// New starts a recorder; Close flushes it.
func New(st *store.Store, log *slog.Logger) *Recorder {
	r := &Recorder{st: st, log: log, ch: make(chan store.Refusal, 1024), done: make(chan struct{})}
	go r.write()
	return r
}

func (r *Recorder) write() {
	defer close(r.done)
	for ref := range r.ch {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Past store.MaxRefusalsPerClaim a refusal is counted, not kept.
		if _, err := r.st.RecordRefusal(ctx, ref); err != nil {
			r.log.Error("refused decision not recorded", "claim", ref.ClaimID, "approver", ref.Approver, "error", err)
		}
		cancel()
	}
}

// Close stops taking refusals and waits for those queued to be written.
func (r *Recorder) Close() {
	close(r.ch)
	<-r.done
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (r *Recorder) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &inbound{r: r}
	in.Next = next
	return in
}

type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
	r *Recorder
}

// ValidateUpdate runs only when an update arrives, never on replay, so each
// refusal is recorded once.
func (i *inbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	err := i.Next.ValidateUpdate(ctx, in)
	if err == nil || in.Name != approvals.UpdateDecide {
		return err
	}
	var d approvals.DecideInput
	if len(in.Args) == 1 {
		switch v := in.Args[0].(type) {
		case approvals.DecideInput:
			d = v
		case *approvals.DecideInput:
			d = *v
		}
	}
	ref := store.Refusal{ClaimID: workflow.GetInfo(ctx).WorkflowExecution.ID, At: time.Now().UTC(), Channel: "update",
		Approver: d.Approver, Decision: string(d.Decision), PayloadSHA256: d.PayloadSHA256, Code: approvals.RefusalCode(err), Reason: approvals.RefusalMessage(err)}
	if d.Receipt != "" {
		// Who and what the receipt claims, unverified: the trail records
		// what was attempted, the refusal says why it did not count.
		kid, r, _ := approvals.PeekReceipt(d.Receipt)
		ref.Approver, ref.Decision, ref.PayloadSHA256, ref.KeyID = r.Subject, string(r.Verdict), r.RequestSHA256, kid
	}
	// One row per refused update however often it is validated (a client
	// retrying with the same update ID, another worker): keyed by its ID.
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil && u.ID != "" {
		ref.Key = ref.ClaimID + ":update:" + clip(u.ID, 128)
	}
	ref.Approver, ref.PayloadSHA256, ref.KeyID = clip(ref.Approver, 128), clip(ref.PayloadSHA256, 64), clip(ref.KeyID, 128)
	ref.Reason = clip(ref.Reason, 1024)
	select {
	case i.r.ch <- ref:
	default:
		i.r.log.Error("refusal queue full; refused decision not recorded", "claim", ref.ClaimID, "code", ref.Code)
	}
	i.r.log.Warn("decision refused", "claim", ref.ClaimID, "channel", "update", "code", ref.Code, "refusal", ref.Reason)
	return err
}

// clip bounds what one refused update may write to the store.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
