package stripesim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied by Open to zero Config fields.
const (
	DefaultAPIKey          = "sk_test_local"
	DefaultKeyTTL          = 24 * time.Hour
	DefaultInFlightTimeout = 60 * time.Second
)

// Config configures a Server. Zero values select the documented defaults.
type Config struct {
	// DBPath is the SQLite file. "" or ":memory:" selects a private in-memory
	// database that disappears on Close.
	DBPath string
	// APIKeys are the accepted secret keys; default []string{"sk_test_local"}.
	// All keys act on the same simulated account (and idempotency key space).
	APIKeys []string
	// KeyTTL is how long idempotency keys are remembered; default 24h, as on
	// Stripe. After that, reusing a key executes a new request.
	KeyTTL time.Duration
	// InFlightTimeout is how long a request may hold an idempotency key before
	// the reservation is considered abandoned (its process died) and another
	// request may take the key over; default 60s.
	InFlightTimeout time.Duration
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// Now is the clock for created timestamps and key expiry; default
	// time.Now. Tests inject a fake clock to expire keys.
	Now func() time.Time
	// Faults are fault-injection rules installed at Open, in order, as if by
	// AddFault; Open fails if one is invalid (see FaultRule.Validate).
	Faults []FaultRule
}

func (c Config) withDefaults() Config {
	if len(c.APIKeys) == 0 {
		c.APIKeys = []string{DefaultAPIKey}
	}
	if c.KeyTTL <= 0 {
		c.KeyTTL = DefaultKeyTTL
	}
	if c.InFlightTimeout <= 0 {
		c.InFlightTimeout = DefaultInFlightTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Hooks let tests and operators interfere with request processing.
type Hooks struct {
	// BeforeCommit is called for POST /v1/transfers after validation and
	// idempotency-key reservation, before the transfer is committed
	// (idempotencyKey is "" for requests without a key). Blocking here keeps
	// the key in flight, so concurrent requests with it get 409. Returning an
	// error simulates a failure before commit: the client gets 500 api_error,
	// the key is released and nothing is stored.
	BeforeCommit func(r *http.Request, idempotencyKey string) error
}

// Server is a Stripe-compatible HTTP API backed by SQLite.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   *store
	hooks   atomic.Pointer[Hooks]
	faults  faultSet
	handler http.Handler
	// closing is closed by BeginShutdown; it cuts slow faults short.
	closing      chan struct{}
	shutdownOnce sync.Once
}

// Open creates or opens the database, applies the schema and returns a server
// ready to serve. Close releases the database.
func Open(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := validateFaults(cfg.Faults); err != nil {
		return nil, fmt.Errorf("stripesim: %w", err)
	}
	db, err := openDB(cfg.DBPath)
	if err != nil {
		return nil, fmt.Errorf("stripesim: open %q: %w", cfg.DBPath, err)
	}
	st, err := newStore(context.Background(), db)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: st, closing: make(chan struct{})}
	s.hooks.Store(&Hooks{})
	for _, r := range cfg.Faults {
		s.faults.add(r)
	}
	if len(cfg.Faults) > 0 {
		s.log.Warn("fault injection active", "rules", len(cfg.Faults))
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler serving the API and the /_sim endpoints.
func (s *Server) Handler() http.Handler { return s.handler }

// BeginShutdown announces that the server is going away: a request asleep
// in a slow fault wakes at once and is answered 503 without being processed,
// and so is every slow fault that fires later. Nothing else changes, so
// in-flight requests can still finish. Register it with
// http.Server.RegisterOnShutdown so that Shutdown need not wait out a long
// delay. It is safe to call more than once, and Close calls it.
func (s *Server) BeginShutdown() {
	s.shutdownOnce.Do(func() { close(s.closing) })
}

// Close ends slow-fault sleeps (see BeginShutdown), then closes the
// database. In-flight requests should be drained first
// (http.Server.Shutdown) so none fails mid-commit.
func (s *Server) Close() error {
	s.BeginShutdown()
	return s.store.db.Close()
}

// SetHooks replaces the hooks. It is safe to call at any time; requests
// already past the hook point are unaffected.
func (s *Server) SetHooks(h Hooks) { s.hooks.Store(&h) }

// KeyStats reports usage of one idempotency key; false if the key is unknown
// or expired (or the database failed, which is logged).
func (s *Server) KeyStats(key string) (KeyStats, bool) {
	ks, ok, err := s.store.keyStats(context.Background(), key, s.expiresBefore())
	if err != nil {
		s.log.Error("key stats", "idempotency_key", key, "err", err)
	}
	return ks, ok
}

// AllKeyStats reports every unexpired idempotency key, oldest first.
func (s *Server) AllKeyStats() ([]KeyStats, error) {
	return s.store.allKeyStats(context.Background(), s.expiresBefore())
}

func (s *Server) now() time.Time { return s.cfg.Now() }

func (s *Server) expiresBefore() time.Time { return s.now().Add(-s.cfg.KeyTTL) }

// --- routing & middleware ---------------------------------------------------

// methods dispatches on the HTTP method and answers anything else with a
// Stripe-shaped 405 (net/http's own 405 is plain text).
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m[r.Method]; ok {
		h(w, r)
		return
	}
	allowed := make([]string, 0, len(m))
	for method := range m {
		allowed = append(allowed, method)
	}
	slices.Sort(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, invalidRequest(http.StatusMethodNotAllowed, "", "",
		"Method %s is not allowed for %s (allowed: %s).", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
}

func (s *Server) routes() http.Handler {
	api := http.NewServeMux()
	api.Handle("/v1/transfers", methods{http.MethodGet: s.listTransfers, http.MethodPost: s.createTransfer})
	api.Handle("/v1/transfers/{id}", methods{http.MethodGet: s.getTransfer})
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, errUnrecognizedURL(r)) })

	root := http.NewServeMux()
	root.Handle("/v1/", s.authenticate(s.injectFaults(api)))
	root.Handle("/_sim/health", methods{http.MethodGet: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "ok")
	}})
	root.Handle("/_sim/idempotency", methods{http.MethodGet: s.serveKeyStats})
	root.Handle("/_sim/faults", methods{
		http.MethodGet:    s.serveFaults,
		http.MethodPost:   s.serveAddFault,
		http.MethodDelete: s.serveClearFaults,
	})
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, errUnrecognizedURL(r)) })
	return s.logRequests(root)
}

func (s *Server) serveKeyStats(w http.ResponseWriter, r *http.Request) {
	stats, err := s.AllKeyStats()
	if err != nil {
		writeError(w, s.internalError(r, "key stats", err))
		return
	}
	writeJSON(w, http.StatusOK, stats)
}

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (to hijack it for
// FaultDropAfterCommit).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// logRequests assigns the Request-Id every Stripe response carries and logs
// one line per request.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		reqID := newRequestID()
		w.Header().Set("Request-Id", reqID)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.String("idempotency_key", r.Header.Get("Idempotency-Key")),
			slog.Bool("replayed", w.Header().Get("Idempotent-Replayed") == "true"),
			slog.String("request_id", reqID),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		)
	})
}

// authenticate accepts the secret key as a Bearer token or, as Stripe also
// does, as the username of HTTP Basic auth (curl -u sk_test_...:).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKeyFrom(r)
		switch {
		case key == "":
			w.Header().Set("WWW-Authenticate", `Basic realm="Stripe"`)
			writeError(w, invalidRequest(http.StatusUnauthorized, "", "",
				"You did not provide an API key. You need to provide your API key in the Authorization header, "+
					"using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."))
		case !s.validKey(key):
			w.Header().Set("WWW-Authenticate", `Basic realm="Stripe"`)
			writeError(w, invalidRequest(http.StatusUnauthorized, "", "", "Invalid API Key provided: %s", maskKey(key)))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func apiKeyFrom(r *http.Request) string {
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(token)
	}
	if user, _, ok := r.BasicAuth(); ok {
		return user
	}
	return ""
}

// validKey compares in constant time so response timing does not leak how
// much of a guessed key matched.
func (s *Server) validKey(key string) bool {
	ok := false
	for _, k := range s.cfg.APIKeys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			ok = true
		}
	}
	return ok
}

var keyPrefixRE = regexp.MustCompile(`^[a-z]{2,4}_(test|live)_`)

// maskKey hides all but a key's type prefix and last four characters, the way
// Stripe echoes a rejected key: sk_test_****abcd.
func maskKey(key string) string {
	prefix := keyPrefixRE.FindString(key)
	rest := key[len(prefix):]
	if len(rest) <= 4 {
		return prefix + "****"
	}
	return prefix + "****" + rest[len(rest)-4:]
}

// --- responses --------------------------------------------------------------

// marshalJSON renders like Stripe: two-space indentation, no HTML escaping.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshalJSON(v)
	if err != nil {
		// Only reachable with a programming error (unencodable value).
		http.Error(w, `{"error":{"type":"api_error","message":"response encoding failed"}}`, http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, body)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// internalError logs the cause and returns the generic 500 sent to clients.
func (s *Server) internalError(r *http.Request, what string, err error) *apiError {
	s.log.Error(what, "method", r.Method, "path", r.URL.Path, "err", err)
	return errInternal("An unexpected error occurred (%s). Please try again.", what)
}
