package config

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Logs are read by more people, and kept longer, than claim data may be:
// every line the binaries write has e-mail addresses and Stripe account IDs
// masked, whichever code logged them (ours, the Temporal SDK's, an error
// message that quotes a provider). Claim IDs and idempotency keys stay: they
// are how an operator follows a claim.

var (
	emailPattern   = regexp.MustCompile(`([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}`)
	accountPattern = regexp.MustCompile(`acct_[A-Za-z0-9]*([A-Za-z0-9]{4})\b`)
)

// Mask hides e-mail addresses (a***@example.com) and Stripe account IDs
// (acct_…1234) in s.
func Mask(s string) string {
	// Most log strings hold neither; each pattern needs its marker.
	if strings.Contains(s, "@") {
		s = emailPattern.ReplaceAllStringFunc(s, func(m string) string {
			return m[:1] + "***" + m[strings.IndexByte(m, '@'):]
		})
	}
	if strings.Contains(s, "acct_") {
		s = accountPattern.ReplaceAllString(s, "acct_…$1")
	}
	return s
}

// maskHandler masks every record's message and attributes.
type maskHandler struct{ next slog.Handler }

// MaskHandler wraps h so that what it writes is masked.
func MaskHandler(h slog.Handler) slog.Handler { return maskHandler{next: h} }

func (h maskHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Mask(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(maskAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h maskHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = maskAttr(a)
	}
	return maskHandler{next: h.next.WithAttrs(masked)}
}

func (h maskHandler) WithGroup(name string) slog.Handler {
	return maskHandler{next: h.next.WithGroup(name)}
}

func maskAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Mask(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]any, len(group))
		for i, g := range group {
			masked[i] = maskAttr(g)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Mask(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, Mask(x.String()))
		case []string, map[string]string, []any, map[string]any:
			return slog.String(a.Key, Mask(fmt.Sprint(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
