package stripesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Fault is a kind of receiver failure the simulator can inject; see
// FaultRule and the package documentation.
type Fault string

const (
	// FaultErrorAfterCommit executes the request normally (for a create: the
	// transfer and its saved idempotent response commit together), then
	// answers 500 api_error instead of the real response.
	FaultErrorAfterCommit Fault = "500-after-commit"
	// FaultDropAfterCommit executes the request normally, then closes the TCP
	// connection without writing any response (the connection is hijacked;
	// on HTTP/2 the stream is reset instead).
	FaultDropAfterCommit Fault = "drop-after-commit"
	// FaultSlow sleeps FaultRule.Delay before handling the request, that is
	// before the idempotency key is reserved, then proceeds normally even if
	// the client has given up meanwhile. Server.BeginShutdown (and Close)
	// cut the sleep short: the request is then answered 503 api_error and
	// not processed, so shutdown need not wait out the delay.
	FaultSlow Fault = "slow"
	// FaultRateLimit answers 429 rate_limit without executing anything.
	FaultRateLimit Fault = "429"
	// FaultKeyInUse answers 409 idempotency_key_in_use, exactly as a real
	// in-flight conflict would, without executing anything.
	FaultKeyInUse Fault = "409"
	// FaultErrorBeforeCommit answers 500 api_error without executing
	// anything, so the key stays free.
	FaultErrorBeforeCommit Fault = "500-before-commit"
	// FaultStaleList answers a list (GET /v1/transfers) with no transfers,
	// as a list that has not caught up with a create yet: a caller's
	// check-then-act finds nothing and creates again, and the key's
	// replay is what keeps it to one transfer.
	FaultStaleList Fault = "stale-list"
)

var faultKinds = []Fault{
	FaultErrorAfterCommit, FaultDropAfterCommit, FaultSlow,
	FaultRateLimit, FaultKeyInUse, FaultErrorBeforeCommit, FaultStaleList,
}

// Defaults for FaultRule fields left empty.
const (
	DefaultFaultMethod = http.MethodPost
	DefaultFaultPath   = "/v1/transfers"
)

// FaultRule says which requests get which fault. A request matches when its
// method and exact path are equal to the rule's and, if set, its
// transfer_group parameter (form body or query string for POST, query string
// for GET) equals TransferGroup and its Idempotency-Key starts with
// KeyPrefix. Faults apply to authenticated /v1 requests only, never to the
// /_sim endpoints.
//
// In JSON, Delay is a Go duration string such as "250ms" or "3s" (a number
// is rejected, so "3" cannot silently mean three nanoseconds), and unknown
// fields are rejected, so a misspelt filter cannot widen a rule to every
// request. ID, Fired and Retired are output-only: they are ignored on input.
type FaultRule struct {
	// ID identifies the rule; assigned by AddFault.
	ID    int   `json:"id"`
	Fault Fault `json:"fault"`
	// Method defaults to "POST" and is compared case-insensitively.
	Method string `json:"method,omitempty"`
	// Path defaults to "/v1/transfers" and must match exactly.
	Path string `json:"path,omitempty"`
	// TransferGroup, if set, must equal the request's transfer_group.
	TransferGroup string `json:"transfer_group,omitempty"`
	// KeyPrefix, if set, must prefix the request's Idempotency-Key (so a rule
	// with a prefix never matches a request without a key).
	KeyPrefix string `json:"key_prefix,omitempty"`
	// Times is how often the rule fires before it retires: 0 means once, -1
	// forever. Listings show the effective value.
	Times int `json:"times,omitempty"`
	// Delay is how long FaultSlow sleeps; required for it, and only for it.
	Delay time.Duration `json:"delay,omitempty"`
	// Fired counts the requests the rule has fired on.
	Fired int `json:"fired"`
	// Retired is true once Fired has reached Times.
	Retired bool `json:"retired"`
}

// faultRuleFields has FaultRule's fields without its JSON methods.
type faultRuleFields FaultRule

// MarshalJSON renders Delay as a Go duration string.
func (r FaultRule) MarshalJSON() ([]byte, error) {
	delay := ""
	if r.Delay != 0 {
		delay = r.Delay.String()
	}
	return json.Marshal(struct {
		faultRuleFields
		Delay string `json:"delay,omitempty"`
	}{faultRuleFields(r), delay})
}

// UnmarshalJSON reads Delay as a Go duration string and rejects unknown
// fields. It does not validate the rule: see Validate.
func (r *FaultRule) UnmarshalJSON(b []byte) error {
	var aux struct {
		faultRuleFields
		Delay json.RawMessage `json:"delay"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	rule := FaultRule(aux.faultRuleFields)
	if len(aux.Delay) > 0 && string(aux.Delay) != "null" {
		var s string
		if err := json.Unmarshal(aux.Delay, &s); err != nil {
			return fmt.Errorf(`fault rule: delay must be a Go duration string such as "3s", got %s`, aux.Delay)
		}
		if s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("fault rule: delay: %w", err)
			}
			rule.Delay = d
		}
	}
	*r = rule
	return nil
}

// Validate reports whether the rule can be added: a known Fault, Times of -1
// or more, a Delay that is positive for FaultSlow and zero otherwise, a
// Method, if set, that is an HTTP method name (letters only), and a Path, if
// set, under "/v1/" (faults apply to nothing else, so a rule for another path
// could never fire).
func (r FaultRule) Validate() error {
	switch {
	case !slices.Contains(faultKinds, r.Fault):
		return fmt.Errorf("fault rule: unknown fault %q (want one of %s)", r.Fault, joinFaults())
	case r.Times < -1:
		return fmt.Errorf("fault rule: times must be -1 (forever), 0 (once) or a positive count, got %d", r.Times)
	case r.Fault == FaultSlow && r.Delay <= 0:
		return fmt.Errorf("fault rule: %q needs a positive delay", FaultSlow)
	case r.Fault != FaultSlow && r.Delay != 0:
		return fmt.Errorf("fault rule: delay is only meaningful for %q", FaultSlow)
	case r.Method != "" && strings.TrimLeft(strings.ToUpper(r.Method), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "":
		return fmt.Errorf("fault rule: method %q must be an HTTP method such as GET or POST", r.Method)
	case r.Fault == FaultStaleList && (!strings.EqualFold(r.Method, http.MethodGet) || (r.Path != "" && r.Path != DefaultFaultPath)):
		return fmt.Errorf("fault rule: %q applies to GET %s only", FaultStaleList, DefaultFaultPath)
	case r.Path != "" && !strings.HasPrefix(r.Path, "/v1/"):
		return fmt.Errorf("fault rule: path %q must start with /v1/ (faults apply to the /v1 API only)", r.Path)
	}
	return nil
}

func joinFaults() string {
	names := make([]string, len(faultKinds))
	for i, f := range faultKinds {
		names[i] = fmt.Sprintf("%q", f)
	}
	return strings.Join(names, ", ")
}

// normalized fills in defaults and resets the output-only fields.
func (r FaultRule) normalized(id int) FaultRule {
	r.ID, r.Fired, r.Retired = id, 0, false
	r.Method = strings.ToUpper(r.Method)
	if r.Method == "" {
		r.Method = DefaultFaultMethod
	}
	if r.Path == "" {
		r.Path = DefaultFaultPath
	}
	if r.Times == 0 {
		r.Times = 1
	}
	return r
}

func (r *FaultRule) live() bool { return r.Times < 0 || r.Fired < r.Times }

// faultRequest is what rules are matched against.
type faultRequest struct {
	Method, Path, Key, TransferGroup string
}

func (r *FaultRule) matches(fr faultRequest) bool {
	return r.live() && r.Method == fr.Method && r.Path == fr.Path &&
		(r.TransferGroup == "" || r.TransferGroup == fr.TransferGroup) &&
		strings.HasPrefix(fr.Key, r.KeyPrefix)
}

// faultSet holds the rules in insertion order. Fired rules are kept (retired)
// so listings show what happened.
type faultSet struct {
	mu     sync.Mutex
	lastID int
	rules  []FaultRule
}

func (fs *faultSet) add(r FaultRule) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.lastID++
	fs.rules = append(fs.rules, r.normalized(fs.lastID))
	return fs.lastID
}

func (fs *faultSet) list() []FaultRule {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := slices.Clone(fs.rules)
	if out == nil {
		out = []FaultRule{}
	}
	for i := range out {
		out[i].Retired = !out[i].live()
	}
	return out
}

func (fs *faultSet) clear() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := len(fs.rules)
	fs.rules = nil
	return n
}

// mayMatch is the cheap pre-check that spares most requests the body
// buffering needed to learn their transfer_group.
func (fs *faultSet) mayMatch(method, path string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i := range fs.rules {
		if r := &fs.rules[i]; r.live() && r.Method == method && r.Path == path {
			return true
		}
	}
	return false
}

// fire finds the first live matching rule and counts the firing; checking and
// counting under one lock means a rule with Times n fires exactly n times
// even under concurrent requests.
func (fs *faultSet) fire(fr faultRequest) (FaultRule, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i := range fs.rules {
		if r := &fs.rules[i]; r.matches(fr) {
			r.Fired++
			fired := *r
			fired.Retired = !fired.live()
			return fired, true
		}
	}
	return FaultRule{}, false
}

// AddFault adds a rule after the existing ones and returns its ID. The rule's
// ID, Fired and Retired fields are ignored. It panics if r.Validate fails
// (an invalid rule is a programming error; the admin endpoint and Open report
// it as an error instead).
func (s *Server) AddFault(r FaultRule) (id int) {
	if err := r.Validate(); err != nil {
		panic("stripesim: AddFault: " + err.Error())
	}
	return s.faults.add(r)
}

// Faults lists every rule, live and retired, in matching order, with IDs and
// fired counts and defaults filled in.
func (s *Server) Faults() []FaultRule { return s.faults.list() }

// ClearFaults removes every rule. IDs are not reused.
func (s *Server) ClearFaults() { s.faults.clear() }

// --- injection ---------------------------------------------------------------

// injectFaults wraps the authenticated API: a request that matches a live rule
// gets that rule's fault instead of (or around) normal handling.
func (s *Server) injectFaults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.faults.mayMatch(r.Method, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		group, aerr := transferGroupOf(w, r)
		if aerr != nil { // refused before any rule fires or counts
			writeError(w, aerr)
			return
		}
		fr := faultRequest{
			Method:        r.Method,
			Path:          r.URL.Path,
			Key:           strings.TrimSpace(r.Header.Get("Idempotency-Key")),
			TransferGroup: group,
		}
		rule, ok := s.faults.fire(fr)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "fault injected",
			slog.Group("rule",
				slog.Int("id", rule.ID),
				slog.String("fault", string(rule.Fault)),
				slog.Int("fired", rule.Fired),
				slog.Int("times", rule.Times),
				slog.Duration("delay", rule.Delay),
			),
			slog.String("method", fr.Method),
			slog.String("path", fr.Path),
			slog.String("idempotency_key", fr.Key),
			slog.String("transfer_group", fr.TransferGroup),
			slog.String("request_id", w.Header().Get("Request-Id")),
		)
		s.applyFault(w, r, next, rule, fr)
	})
}

func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, next http.Handler, rule FaultRule, fr faultRequest) {
	switch rule.Fault {
	case FaultSlow:
		delay := time.NewTimer(rule.Delay)
		defer delay.Stop()
		select {
		case <-delay.C:
		case <-s.closing:
			// Shutting down: give up without processing the request, so
			// neither http.Server.Shutdown nor Close waits out the delay.
			s.log.Warn("slow fault cut short by shutdown", "rule", rule.ID, "idempotency_key", fr.Key)
			writeError(w, errShuttingDown(rule))
			return
		}
		// Like a real provider, the request lands even though the caller may
		// have timed out and hung up while it was queued: detach from the
		// client's cancellation (the body was buffered by transferGroupOf).
		next.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	case FaultStaleList:
		writeJSON(w, http.StatusOK, transferList{Object: "list", Data: []*transfer{}, URL: DefaultFaultPath})
	case FaultRateLimit:
		writeError(w, errRateLimit())
	case FaultKeyInUse:
		if fr.Key != "" {
			w.Header().Set("Idempotency-Key", fr.Key) // as createTransfer does
		}
		writeError(w, errIdempotencyKeyInUse(fr.Key))
	case FaultErrorBeforeCommit:
		writeError(w, errInternal("An error occurred while processing your request (stripesim fault %q, rule %d). "+
			"Nothing was executed; please try again.", rule.Fault, rule.ID))
	case FaultErrorAfterCommit, FaultDropAfterCommit:
		buf := &bufferedResponse{header: w.Header().Clone()}
		next.ServeHTTP(buf, r)
		s.log.Warn("fault discarded the response", "rule", rule.ID, "fault", rule.Fault,
			"discarded_status", buf.status, "idempotency_key", fr.Key,
			"replayed", buf.header.Get("Idempotent-Replayed") == "true")
		if rule.Fault == FaultDropAfterCommit {
			dropConnection(w)
			return
		}
		if k := buf.header.Get("Idempotency-Key"); k != "" {
			w.Header().Set("Idempotency-Key", k)
		}
		writeError(w, errInternal("An error occurred while sending the response (stripesim fault %q, rule %d). "+
			"The request may have been processed; retry with the same Idempotency-Key.", rule.Fault, rule.ID))
	}
}

// dropConnection closes the client's connection without a response. HTTP/2
// connections cannot be hijacked; aborting the handler resets the stream.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

func errRateLimit() *apiError {
	return invalidRequest(http.StatusTooManyRequests, "rate_limit", "",
		"Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.")
}

// transferGroupOf returns the request's transfer_group parameter. It buffers
// the body and puts it back, so the handler still reads it, even after the
// client has gone away during a slow fault. A body over the handler's limit
// (413) or one that cannot be read (400) is refused here, whole, before any
// rule sees a truncated copy of it.
func transferGroupOf(w http.ResponseWriter, r *http.Request) (string, *apiError) {
	values := r.URL.Query()
	if r.Body != nil && r.Body != http.NoBody {
		body, aerr := readBody(w, r, maxBodyBytes, "Invalid request")
		if aerr != nil {
			return "", aerr
		}
		r.Body = readCloser{bytes.NewReader(body), r.Body}
		if isFormContent(r.Header.Get("Content-Type")) {
			form, _ := url.ParseQuery(string(body)) // malformed bodies are the handler's to reject
			for k, vs := range form {
				values[k] = append(vs, values[k]...) // query last, as readForm merges
			}
		}
	}
	tg, _ := last(values, "transfer_group")
	return tg, nil
}

func isFormContent(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bufferedResponse captures a response so an after-commit fault can discard it.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// --- admin endpoints -----------------------------------------------------------

const maxFaultRuleBytes = 64 << 10

func (s *Server) serveFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Server) serveAddFault(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(w, r, maxFaultRuleBytes, "Invalid fault rule")
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var rule FaultRule
	if err := json.Unmarshal(body, &rule); err != nil {
		writeError(w, invalidRequest(http.StatusBadRequest, "", "", "Invalid fault rule: %v", err))
		return
	}
	if err := rule.Validate(); err != nil {
		writeError(w, invalidRequest(http.StatusBadRequest, "", "", "Invalid fault rule: %v", err))
		return
	}
	id := s.AddFault(rule)
	s.log.Info("fault rule added", "rule", id, "fault", rule.Fault)
	writeJSON(w, http.StatusOK, map[string]int{"id": id})
}

func (s *Server) serveClearFaults(w http.ResponseWriter, _ *http.Request) {
	n := s.faults.clear()
	s.log.Info("fault rules cleared", "count", n)
	writeJSON(w, http.StatusOK, map[string]int{"cleared": n})
}

// validateFaults checks Config.Faults before Open touches the database.
func validateFaults(rules []FaultRule) error {
	var errs []error
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("config.Faults[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
