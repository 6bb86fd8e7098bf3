package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Environment variables codec-server reads (besides codec.EnvKeysFile and
// codec.EnvKeys for the keys, and LOG_LEVEL / LOG_FORMAT).
const (
	envAddr        = "CODEC_SERVER_ADDR"
	envCORSOrigins = "CODEC_CORS_ORIGINS"
	envAuthTokens  = "CODEC_AUTH_TOKENS"
	envTLSCert     = "CODEC_TLS_CERT_FILE"
	envTLSKey      = "CODEC_TLS_KEY_FILE"
)

const (
	defaultAddr = "localhost:8081"
	// defaultOrigin is the Web UI of `temporal server start-dev`.
	defaultOrigin = "http://localhost:8233"
	// maxBodyBytes bounds a request: the UI sends one event's payloads at a
	// time, each at most the server's blob size limit (2 MiB by default).
	maxBodyBytes = 32 << 20
)

// settings is codec-server's configuration from the environment.
type settings struct {
	addr         string
	addrExplicit bool
	origins      []string
	tokens       []string
	tlsCert      string
	tlsKey       string
}

func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{addr: defaultAddr}
	if a := strings.TrimSpace(getenv(envAddr)); a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return s, fmt.Errorf("%s=%q: want host:port: %w", envAddr, a, err)
		}
		s.addr, s.addrExplicit = a, true
	}

	origins := defaultOrigin
	if o, set := lookup(getenv, envCORSOrigins); set {
		origins = o
	}
	for _, o := range splitList(origins) {
		if o == "*" {
			return s, fmt.Errorf("%s: \"*\" is not allowed (credentials are allowed, so every origin must be listed)", envCORSOrigins)
		}
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return s, fmt.Errorf("%s: origin %q must start with http:// or https://", envCORSOrigins, o)
		}
		s.origins = append(s.origins, strings.TrimSuffix(o, "/"))
	}

	if raw, set := lookup(getenv, envAuthTokens); set {
		s.tokens = splitList(raw)
		if len(s.tokens) == 0 {
			return s, fmt.Errorf("%s is set but holds no token; unset it to run without authentication", envAuthTokens)
		}
	}

	s.tlsCert, s.tlsKey = strings.TrimSpace(getenv(envTLSCert)), strings.TrimSpace(getenv(envTLSKey))
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return s, fmt.Errorf("set both %s and %s, or neither", envTLSCert, envTLSKey)
	}
	return s, nil
}

// lookup treats an empty variable as unset.
func lookup(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// server is the codec HTTP handler with CORS, access control and logging
// around the SDK's converter.NewPayloadCodecHTTPHandler.
type server struct {
	codec   converter.PayloadCodec
	origins map[string]bool
	tokens  [][sha256.Size]byte
	logger  *slog.Logger
}

func newHandler(c converter.PayloadCodec, s settings, logger *slog.Logger) http.Handler {
	srv := &server{codec: c, origins: map[string]bool{}, logger: logger}
	for _, o := range s.origins {
		srv.origins[o] = true
	}
	for _, t := range s.tokens {
		srv.tokens = append(srv.tokens, sha256.Sum256([]byte(t)))
	}
	return srv
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	var count atomic.Int64
	count.Store(-1)
	defer func() {
		attrs := []any{
			"method", r.Method,
			"path", r.URL.Path,
			"namespace", truncate(r.Header.Get("X-Namespace"), 200),
			"status", rec.status(),
			"duration_ms", time.Since(start).Milliseconds(),
			"remote", r.RemoteAddr,
		}
		if n := count.Load(); n >= 0 {
			attrs = append(attrs, "payloads", n)
		}
		if o := r.Header.Get("Origin"); o != "" {
			attrs = append(attrs, "origin", truncate(o, 200))
		}
		s.logger.Info("request", attrs...)
	}()
	s.serve(rec, r, &count)
}

func (s *server) serve(w http.ResponseWriter, r *http.Request, count *atomic.Int64) {
	h := w.Header()
	h.Add("Vary", "Origin")
	if origin := r.Header.Get("Origin"); origin != "" {
		// Browsers send Origin on every cross-origin request and on every
		// POST; refusing unknown origins outright also stops a page that
		// rebinds its own host name to this address.
		if !s.origins[origin] {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}

	if r.Method == http.MethodOptions {
		// CORS preflight: answered without credentials, which browsers
		// never send on a preflight.
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
		h.Set("Access-Control-Max-Age", "600")
		if r.Header.Get("Access-Control-Request-Private-Network") == "true" && r.Header.Get("Origin") != "" {
			// A UI served from a public origin calling a codec server on
			// this machine (Chrome's Private Network Access).
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}

	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		_, _ = w.Write([]byte("ok\n"))
		return
	}

	if len(s.tokens) > 0 && !s.authorized(r.Header.Get("Authorization")) {
		h.Set("WWW-Authenticate", `Bearer realm="codec-server"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}

	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	}
	// A fresh SDK handler per request (a small struct) so the codec can
	// count this request's payloads.
	converter.NewPayloadCodecHTTPHandler(&countingCodec{PayloadCodec: s.codec, n: count}).ServeHTTP(w, r)
}

// authorized checks "Bearer <token>" against every configured token in
// constant time (comparing SHA-256 digests hides the tokens' lengths).
func (s *server) authorized(header string) bool {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(header[len(scheme):])))
	match := 0
	for _, want := range s.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// countingCodec records how many payloads a request carried.
type countingCodec struct {
	converter.PayloadCodec
	n *atomic.Int64
}

func (c *countingCodec) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	c.n.Store(int64(len(p)))
	return c.PayloadCodec.Encode(p)
}

func (c *countingCodec) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	c.n.Store(int64(len(p)))
	return c.PayloadCodec.Decode(p)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// Unwrap lets http.ResponseController (used by MaxBytesReader) reach the
// underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var errNoKeys = errors.New("no payload keys: PAYLOAD_ENCRYPTION=off, so there is nothing to decode; set CODEC_KEYS_FILE (path of a key file) or CODEC_KEYS (its JSON); make one with -generate-key ID")

// errNoTokensBeyondLoopback is serve's refusal to listen beyond the loopback
// interface without CODEC_AUTH_TOKENS.
var errNoTokensBeyondLoopback = errors.New("refusing to serve /decode beyond localhost without " + envAuthTokens)
