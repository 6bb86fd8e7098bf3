package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
)

const (
	uiOrigin      = "http://localhost:8233"
	claimantName  = "Genoveva Quintanilla-Oyelaran"
	claimantEmail = "genoveva.q@example.org"
)

// claimJSON is a claim as the SDK's json/plain converter writes it.
const claimJSON = `{"claim_id":"clm-1","claimant":{"name":"` + claimantName + `","email":"` + claimantEmail + `","stripe_account":"acct_1PiiLeak"},"amount_minor":1234567,"currency":"EUR"}`

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// syncBuffer is a log sink safe to read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testKeyring(t *testing.T) *codec.Keyring {
	t.Helper()
	kr, _, err := codec.GenerateKeyring("2026-11")
	require.NoError(t, err)
	return &kr
}

type fixture struct {
	url  string
	logs *syncBuffer
	kr   *codec.Keyring
}

func newFixture(t *testing.T, env map[string]string) fixture {
	t.Helper()
	kr := testKeyring(t)
	c, err := codec.New(kr)
	require.NoError(t, err)
	s, err := loadSettings(func(k string) string { return env[k] })
	require.NoError(t, err)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ts := httptest.NewServer(newHandler(c, s, logger))
	t.Cleanup(ts.Close)
	return fixture{url: ts.URL, logs: logs, kr: kr}
}

func post(t *testing.T, url, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// wirePayloads is the JSON the UI and CLI exchange.
type wirePayloads struct {
	Payloads []struct {
		Metadata map[string]string `json:"metadata"`
		Data     string            `json:"data"`
	} `json:"payloads"`
}

func decodeWire(t *testing.T, body string) wirePayloads {
	t.Helper()
	var w wirePayloads
	require.NoError(t, json.Unmarshal([]byte(body), &w), body)
	return w
}

func TestEncodeDecodeRoundTripUIShape(t *testing.T) {
	f := newFixture(t, nil)
	// Exactly what the Web UI posts: Payloads in proto JSON, bytes base64.
	uiBody := `{"payloads":[` +
		`{"metadata":{"encoding":"` + b64("json/plain") + `"},"data":"` + b64(claimJSON) + `"},` +
		`{"metadata":{"encoding":"` + b64("json/plain") + `"},"data":"` + b64(`"`+claimantEmail+`"`) + `"},` +
		`{"metadata":{"encoding":"` + b64("binary/null") + `"}}` +
		`]}`
	hdr := map[string]string{"X-Namespace": "claims", "Origin": uiOrigin}

	for _, prefix := range []string{"", "/claims"} { // the protocol allows mounting under a path
		resp, encBody := post(t, f.url+prefix+"/encode", uiBody, hdr)
		require.Equal(t, http.StatusOK, resp.StatusCode, encBody)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))

		enc := decodeWire(t, encBody)
		require.Len(t, enc.Payloads, 3)
		for _, p := range enc.Payloads {
			assert.Equal(t, b64("binary/encrypted"), p.Metadata["encoding"])
			assert.Equal(t, b64("2026-11"), p.Metadata["encryption-key-id"])
		}
		for _, needle := range []string{claimantName, claimantEmail, "Genoveva", b64(claimJSON)[:20], b64("json/plain")} {
			assert.NotContains(t, encBody, needle)
		}

		resp, decBody := post(t, f.url+prefix+"/decode", encBody, hdr)
		require.Equal(t, http.StatusOK, resp.StatusCode, decBody)
		dec := decodeWire(t, decBody)
		require.Len(t, dec.Payloads, 3)
		assert.Equal(t, b64("json/plain"), dec.Payloads[0].Metadata["encoding"])
		data, err := base64.StdEncoding.DecodeString(dec.Payloads[0].Data)
		require.NoError(t, err)
		assert.JSONEq(t, claimJSON, string(data))
		assert.Equal(t, b64(`"`+claimantEmail+`"`), dec.Payloads[1].Data)
		assert.Equal(t, b64("binary/null"), dec.Payloads[2].Metadata["encoding"])
		assert.Empty(t, dec.Payloads[2].Data)
	}

	// Payloads recorded before encryption was on come back unchanged.
	plain := `{"payloads":[{"metadata":{"encoding":"` + b64("json/plain") + `"},"data":"` + b64(`"old"`) + `"}]}`
	resp, body := post(t, f.url+"/decode", plain, hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, b64(`"old"`), decodeWire(t, body).Payloads[0].Data)

	// One log line per request with path, namespace, status and payload
	// count, and never payload contents.
	logs := f.logs.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	require.Len(t, lines, 5)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "/encode", first["path"])
	assert.Equal(t, "claims", first["namespace"])
	assert.EqualValues(t, 200, first["status"])
	assert.EqualValues(t, 3, first["payloads"])
	assert.Contains(t, lines[3], `"path":"/claims/decode"`)
	for _, needle := range []string{claimantName, claimantEmail, "Genoveva", b64(claimJSON)[:20], "old", base64.StdEncoding.EncodeToString(f.kr.Keys["2026-11"])} {
		assert.NotContains(t, logs, needle)
	}
}

func TestDecodeErrors(t *testing.T) {
	f := newFixture(t, nil)
	_, encBody := post(t, f.url+"/encode", `{"payloads":[{"metadata":{"encoding":"`+b64("json/plain")+`"},"data":"`+b64(claimJSON)+`"}]}`, nil)

	// Relabelled to a key the server does not have.
	relabelled := strings.Replace(encBody, b64("2026-11"), b64("2019-01"), 1)
	resp, body := post(t, f.url+"/decode", relabelled, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, `2019-01`)
	assert.Contains(t, body, "not in the key ring")

	// Tampered ciphertext.
	w := decodeWire(t, encBody)
	raw, err := base64.StdEncoding.DecodeString(w.Payloads[0].Data)
	require.NoError(t, err)
	raw[len(raw)-1] ^= 1
	tampered := strings.Replace(encBody, w.Payloads[0].Data, base64.StdEncoding.EncodeToString(raw), 1)
	resp, body = post(t, f.url+"/decode", tampered, nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "failed authentication")
	assert.NotContains(t, body, base64.StdEncoding.EncodeToString(f.kr.Keys["2026-11"]))

	// Not JSON; wrong method; unknown path.
	resp, _ = post(t, f.url+"/decode", "nope", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	get, err := http.Get(f.url + "/decode")
	require.NoError(t, err)
	get.Body.Close()
	assert.Equal(t, http.StatusNotFound, get.StatusCode)
	resp, _ = post(t, f.url+"/other", "{}", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	// Health check.
	get, err = http.Get(f.url + "/healthz")
	require.NoError(t, err)
	get.Body.Close()
	assert.Equal(t, http.StatusOK, get.StatusCode)

	assert.NotContains(t, f.logs.String(), claimantName)
}

func preflight(t *testing.T, url, origin string, extra map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace,authorization")
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func TestCORS(t *testing.T) {
	t.Run("default origin is the dev server UI", func(t *testing.T) {
		f := newFixture(t, nil)
		resp := preflight(t, f.url+"/decode", uiOrigin, nil)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
		assert.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
		allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
		for _, h := range []string{"content-type", "x-namespace", "authorization"} {
			assert.Contains(t, allowed, h)
		}
		assert.Contains(t, resp.Header.Values("Vary"), "Origin")
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Private-Network"))
	})
	t.Run("other origins are refused", func(t *testing.T) {
		f := newFixture(t, nil)
		resp := preflight(t, f.url+"/decode", "https://evil.example", nil)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		r, _ := post(t, f.url+"/decode", `{"payloads":[]}`, map[string]string{"Origin": "https://evil.example"})
		assert.Equal(t, http.StatusForbidden, r.StatusCode)
		assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("configured list", func(t *testing.T) {
		f := newFixture(t, map[string]string{envCORSOrigins: "https://temporal.internal.example/, http://localhost:8080"})
		resp := preflight(t, f.url+"/decode", "https://temporal.internal.example", map[string]string{"Access-Control-Request-Private-Network": "true"})
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.Equal(t, "https://temporal.internal.example", resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Private-Network"))
		assert.Equal(t, http.StatusNoContent, preflight(t, f.url+"/decode", "http://localhost:8080", nil).StatusCode)
		assert.Equal(t, http.StatusForbidden, preflight(t, f.url+"/decode", uiOrigin, nil).StatusCode)
	})
	t.Run("preflight needs no token", func(t *testing.T) {
		f := newFixture(t, map[string]string{envAuthTokens: "s3cret"})
		resp := preflight(t, f.url+"/decode", uiOrigin, nil)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("no Origin (CLI) is fine", func(t *testing.T) {
		f := newFixture(t, nil)
		r, body := post(t, f.url+"/decode", `{"payloads":[]}`, nil)
		assert.Equal(t, http.StatusOK, r.StatusCode, body)
		assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	})
}

func TestAuthTokens(t *testing.T) {
	f := newFixture(t, map[string]string{envAuthTokens: "tok-alpha-123, tok-beta-456"})
	body := `{"payloads":[{"metadata":{"encoding":"` + b64("json/plain") + `"},"data":"` + b64(claimJSON) + `"}]}`

	for name, auth := range map[string]string{
		"missing":         "",
		"wrong token":     "Bearer tok-gamma-789",
		"prefix of token": "Bearer tok-alpha",
		"token plus more": "Bearer tok-alpha-1234",
		"basic scheme":    "Basic " + b64("tok-alpha-123"),
		"bare token":      "tok-alpha-123",
		"empty bearer":    "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			hdr := map[string]string{"Origin": uiOrigin}
			if auth != "" {
				hdr["Authorization"] = auth
			}
			for _, path := range []string{"/encode", "/decode"} {
				resp, out := post(t, f.url+path, body, hdr)
				assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
				// CORS headers on the 401 so the UI can see why.
				assert.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
				assert.NotContains(t, out, "tok-")
			}
		})
	}

	for _, auth := range []string{"Bearer tok-alpha-123", "Bearer tok-beta-456", "bearer tok-beta-456", "Bearer  tok-alpha-123 "} {
		resp, out := post(t, f.url+"/encode", body, map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q: %s", auth, out)
		resp, out = post(t, f.url+"/decode", out, map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q: %s", auth, out)
		assert.Contains(t, out, b64(claimJSON)[:40])
	}

	logs := f.logs.String()
	assert.Contains(t, logs, `"status":401`)
	assert.NotContains(t, logs, "tok-alpha")
	assert.NotContains(t, logs, "tok-beta")
	assert.NotContains(t, logs, "tok-gamma")
}

func TestLoadSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	s, err := loadSettings(env(nil))
	require.NoError(t, err)
	assert.Equal(t, "localhost:8081", s.addr)
	assert.False(t, s.addrExplicit)
	assert.Equal(t, []string{"http://localhost:8233"}, s.origins)
	assert.Empty(t, s.tokens)

	s, err = loadSettings(env(map[string]string{envAddr: "0.0.0.0:9000", envAuthTokens: "a, b,,", envCORSOrigins: "https://a.example,https://b.example/"}))
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:9000", s.addr)
	assert.True(t, s.addrExplicit)
	assert.Equal(t, []string{"a", "b"}, s.tokens)
	assert.Equal(t, []string{"https://a.example", "https://b.example"}, s.origins)

	for name, m := range map[string]map[string]string{
		"bad addr":        {envAddr: "8081"},
		"wildcard origin": {envCORSOrigins: "*"},
		"origin scheme":   {envCORSOrigins: "localhost:8233"},
		"empty tokens":    {envAuthTokens: " , ,"},
		"half TLS":        {envTLSCert: "cert.pem"},
	} {
		_, err := loadSettings(env(m))
		assert.Error(t, err, name)
	}
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"localhost:8081", true},
		{"LocalHost:8081", true},
		{"127.0.0.1:8081", true},
		{"127.0.0.2:8081", true}, // all of 127/8 is loopback
		{"[::1]:8081", true},
		{"[::ffff:127.0.0.1]:8081", true}, // IPv4-mapped, listens on 127.0.0.1
		{"localhost:0", true},

		{":8081", false}, // empty host: every interface
		{"0.0.0.0:8081", false},
		{"[::]:8081", false},
		{"10.0.0.5:8081", false},
		{"192.168.1.20:8081", false},
		{"[fe80::1%eth0]:8081", false},
		{"[2001:db8::5]:8081", false},
		{"codec.internal.example:8081", false}, // a name resolves to whatever DNS says
		{"localhost.example.com:8081", false},
		{"mylocalhost:8081", false},
		{"localhost.:8081", false}, // not the literal name: refused, to be safe
		{"[::1%lo]:8081", false},   // zoned: not parsed, so refused, to be safe
		{"localhost", false},       // no port: not an address
		{"", false},
	} {
		assert.Equal(t, tc.want, config.IsLoopback(tc.addr), "isLoopback(%q)", tc.addr)
	}
}

func TestGenerateKeyFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-generate-key", "2026-12"}, &out, &errOut))
	kr, err := codec.Parse(out.Bytes())
	require.NoError(t, err)
	assert.Equal(t, "2026-12", kr.Active)
	assert.Contains(t, errOut.String(), "chmod 600")
	assert.NotContains(t, errOut.String(), base64.StdEncoding.EncodeToString(kr.Keys["2026-12"]))

	out.Reset()
	errOut.Reset()
	assert.Equal(t, 1, run([]string{"-generate-key", "bad\tid"}, &out, &errOut))
	assert.Empty(t, out.String())
	assert.Equal(t, 2, run([]string{"stray"}, &out, &errOut))
}

func TestServeRequiresKeys(t *testing.T) {
	t.Setenv(codec.EnvKeysFile, "")
	t.Setenv(codec.EnvKeys, "")
	t.Setenv("PAYLOAD_ENCRYPTION", "off")
	err := serve(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(string) string { return "" })
	require.ErrorIs(t, err, errNoKeys)

	t.Setenv(codec.EnvKeys, `{"active":"x","keys":{}}`)
	err = serve(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), func(string) string { return "" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CODEC_KEYS")
}

func TestServeAndGracefulShutdown(t *testing.T) {
	_, js, err := codec.GenerateKeyring("2026-11")
	require.NoError(t, err)
	t.Setenv(codec.EnvKeysFile, "")
	t.Setenv(codec.EnvKeys, string(js))
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, logger, func(k string) string {
			if k == envAddr {
				return "127.0.0.1:0"
			}
			return ""
		})
	}()

	endpoint := regexp.MustCompile(`endpoint=(http://127\.0\.0\.1:\d+)`)
	var url string
	require.Eventually(t, func() bool {
		if m := endpoint.FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)

	resp, body := post(t, url+"/encode", `{"payloads":[{"metadata":{"encoding":"`+b64("json/plain")+`"},"data":"`+b64(`"x"`)+`"}]}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("server did not shut down")
	}
	l := logs.String()
	assert.Contains(t, l, "CODEC_AUTH_TOKENS is not set")
	assert.Contains(t, l, "shutting down")
	assert.Contains(t, l, "2026-11", "the active key ID is logged")
	var f struct {
		Keys map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(js, &f))
	assert.NotContains(t, l, f.Keys["2026-11"], "key material logged")
}

// serveEnv is a getenv for serve: the given variables, all others unset.
func serveEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// recordListen makes serve's listen record the addresses it is asked for;
// with fail set it refuses to open anything.
func recordListen(t *testing.T, fail bool) *[]string {
	t.Helper()
	var mu sync.Mutex
	var addrs []string
	orig := listen
	listen = func(network, addr string) (net.Listener, error) {
		mu.Lock()
		addrs = append(addrs, addr)
		mu.Unlock()
		if fail {
			return nil, errors.New("test: serve must not open a socket")
		}
		return orig(network, addr)
	}
	t.Cleanup(func() { listen = orig })
	return &addrs
}

func setTestKeys(t *testing.T) {
	t.Helper()
	_, js, err := codec.GenerateKeyring("2026-11")
	require.NoError(t, err)
	t.Setenv(codec.EnvKeysFile, "")
	t.Setenv(codec.EnvKeys, string(js))
}

// Without CODEC_AUTH_TOKENS, an address beyond loopback is refused before
// any socket is opened, with an error naming the variable and the address.
func TestServeRefusesNonLoopbackWithoutTokens(t *testing.T) {
	setTestKeys(t)
	listened := recordListen(t, true)
	for _, addr := range []string{
		":8081",
		"0.0.0.0:8081",
		"[::]:8081",
		"192.168.1.20:8081",
		"10.0.0.5:0",
		"[2001:db8::5]:8081",
		"codec.internal.example:8081",
		"localhost.example.com:8081",
	} {
		t.Run(addr, func(t *testing.T) {
			logs := &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := serve(ctx, slog.New(slog.NewTextHandler(logs, nil)), serveEnv(map[string]string{envAddr: addr}))
			require.Error(t, err)
			assert.ErrorIs(t, err, errNoTokensBeyondLoopback)
			assert.Contains(t, err.Error(), "CODEC_AUTH_TOKENS")
			assert.Contains(t, err.Error(), strconv.Quote(addr))
			assert.NotContains(t, logs.String(), "codec-server listening")
		})
	}
	assert.Empty(t, *listened, "serve opened a socket")
}

// startServe runs serve with env on a real socket, waits until it listens
// and returns its port, its logs and a stop function that checks a clean
// shutdown.
func startServe(t *testing.T, env map[string]string) (port string, logs *syncBuffer, stop func()) {
	t.Helper()
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, slog.New(slog.NewTextHandler(logs, nil)), serveEnv(env)) }()

	endpoint := regexp.MustCompile(`endpoint=https?://\S*:(\d+)`)
	var err error
	require.Eventually(t, func() bool {
		select {
		case err = <-done:
			return true
		default:
		}
		if m := endpoint.FindStringSubmatch(logs.String()); m != nil {
			port = m[1]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	if port == "" {
		cancel()
		t.Fatalf("serve returned without listening: %v\n%s", err, logs.String())
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(15 * time.Second):
				t.Error("server did not shut down")
			}
		})
	}
	t.Cleanup(stop)
	return port, logs, stop
}

const encodeBody = `{"payloads":[{"metadata":{"encoding":"anNvbi9wbGFpbg=="},"data":"Ingi"}]}` // json/plain "x"

// Loopback without tokens still serves, with the warning.
func TestServeLoopbackWithoutTokensStarts(t *testing.T) {
	setTestKeys(t)
	addrs := []struct{ addr, dial string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"localhost:0", "localhost"},
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, struct{ addr, dial string }{"[::1]:0", "[::1]"})
	}
	for _, a := range addrs {
		t.Run(a.addr, func(t *testing.T) {
			listened := recordListen(t, false)
			port, logs, stop := startServe(t, map[string]string{envAddr: a.addr})
			assert.Equal(t, []string{a.addr}, *listened)
			resp, body := post(t, "http://"+a.dial+":"+port+"/encode", encodeBody, nil)
			assert.Equal(t, http.StatusOK, resp.StatusCode, body)
			stop()
			assert.Contains(t, logs.String(), "CODEC_AUTH_TOKENS is not set")
			assert.Contains(t, logs.String(), "auth=false")
		})
	}
}

// Beyond loopback with tokens: serves, and only to token holders.
func TestServeNonLoopbackWithTokensStarts(t *testing.T) {
	setTestKeys(t)
	listened := recordListen(t, false)
	port, logs, stop := startServe(t, map[string]string{envAddr: "0.0.0.0:0", envAuthTokens: "tok-alpha-123"})
	assert.Equal(t, []string{"0.0.0.0:0"}, *listened)
	url := "http://127.0.0.1:" + port + "/encode"
	resp, _ := post(t, url, encodeBody, nil)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, body := post(t, url, encodeBody, map[string]string{"Authorization": "Bearer tok-alpha-123"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	stop()
	assert.NotContains(t, logs.String(), "CODEC_AUTH_TOKENS is not set")
	assert.Contains(t, logs.String(), "auth=true")
	assert.NotContains(t, logs.String(), "tok-alpha")
}
