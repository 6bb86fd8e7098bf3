package crash

import (
	"context"
	"reflect"

	"go.temporal.io/sdk/interceptor"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Interceptor is the worker interceptor that tells the injector about every
// activity with a crash point: before-effect when the activity starts,
// after-effect when it has returned successfully, before its result goes
// back to the server. The SDK runs local activities (intake, the triage
// turns and tools, notify, audit, approval open) through the same
// interceptors as regular ones. Register it last, so it sits closest to
// the activity.
func (i *Injector) Interceptor() interceptor.WorkerInterceptor {
	return &workerInterceptor{inj: i}
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	inj *Injector
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &inbound{inj: w.inj}
	a.Next = next
	return a
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
	inj *Injector
}

func (a *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	key, ok := PointKey(in.Args)
	if !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	ctx = context.WithValue(ctx, pointKey{}, key)
	a.inj.At(ctx, key, BeforeEffect)
	out, err := a.Next.ExecuteActivity(ctx, in)
	if err == nil {
		a.inj.At(ctx, key, AfterEffect)
	}
	return out, err
}

// pointKey is the context key under which the interceptor leaves the
// running activity's crash point key for the dependency wrappers (Mailer).
type pointKey struct{}

var idempotencyKeyType = reflect.TypeFor[claim.IdempotencyKey]()

// PointKey is the key an activity's crash points fire at, from its
// arguments: the Key of a side-effecting activity's input (every one has
// one), or, for the two reads that need none, the step's key of the claim
// they read: intake (LoadClaim) and approval (OpenApproval). Activities
// with neither have no crash point.
func PointKey(args []any) (claim.IdempotencyKey, bool) {
	if len(args) == 0 || args[0] == nil {
		return "", false
	}
	v := reflect.ValueOf(args[0])
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	switch in := v.Interface().(type) {
	case activities.LoadClaimInput:
		return claim.StepKey(in.Claim.ID, claim.StepIntake), true
	case activities.OpenApprovalInput:
		return claim.StepKey(in.ClaimID, claim.StepApproval), true
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	f := v.FieldByName("Key")
	if !f.IsValid() || f.Type() != idempotencyKeyType {
		return "", false
	}
	key := f.Interface().(claim.IdempotencyKey)
	return key, key != ""
}

// Mailer wraps the activities' mailer so a point's after-effect fires as
// soon as a message is sent, before the activity records it sent: the
// window in which a crash makes the retry send the same message again
// (same Message-ID), which is what the e-mail crash tests show. The
// interceptor's after-effect for the same activity then finds the point
// fired. Without the interceptor's key in the context, Send only sends.
func (i *Injector) Mailer(next activities.Mailer) activities.Mailer {
	return &mailer{next: next, inj: i}
}

type mailer struct {
	next activities.Mailer
	inj  *Injector
}

// Has asks the wrapped mailer, when it can be asked (activities.Finder).
func (m *mailer) Has(ctx context.Context, messageID string) (bool, error) {
	if f, ok := m.next.(activities.Finder); ok {
		return f.Has(ctx, messageID)
	}
	return false, nil
}

func (m *mailer) Send(ctx context.Context, e activities.Email) error {
	if err := m.next.Send(ctx, e); err != nil {
		return err
	}
	if key, ok := ctx.Value(pointKey{}).(claim.IdempotencyKey); ok {
		m.inj.At(ctx, key, AfterEffect)
	}
	return nil
}
