package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// The parts of the inbox that do not reach Temporal: headers, sessions,
// form tokens and the sign-in rules. The browser test in e2e/ drives the
// rest against a real dev server, worker and identity provider.

func testServer(t testing.TB, book authority.Book) (*httptest.Server, *cookies) {
	t.Helper()
	ck, err := newCookies([]byte(strings.Repeat("k", 32)), false)
	require.NoError(t, err)
	s := &server{log: slog.New(slog.DiscardHandler), cookies: ck, directory: func() (authority.Book, error) { return book, nil }}
	s.pages, err = parsePages()
	require.NoError(t, err)
	s.routes()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, ck
}

func sampleBook(t testing.TB) authority.Book {
	book, err := authority.Load("")
	require.NoError(t, err)
	return book
}

func browser(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func body(t testing.TB, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

var hidden = regexp.MustCompile(`name="token" value="([^"]+)"`)

// devSignIn signs c in as approver through the development sign-in page.
func devSignIn(t testing.TB, c *http.Client, base, approver string) {
	t.Helper()
	res, err := c.Get(base + "/login")
	require.NoError(t, err)
	m := hidden.FindStringSubmatch(body(t, res))
	require.NotNil(t, m, "the sign-in page has a form token")
	res, err = c.PostForm(base+"/dev-login", url.Values{"token": {m[1]}, "approver": {approver}})
	require.NoError(t, err)
	body(t, res)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	ts, _ := testServer(t, sampleBook(t))
	for _, path := range []string{"/healthz", "/login", "/", "/claims/claim-1", "/static/inbox.css", "/nowhere"} {
		res, err := browser(t).Get(ts.URL + path)
		require.NoError(t, err)
		body(t, res)
		h := res.Header
		assert.Equal(t, contentSecurityPolicy, h.Get("Content-Security-Policy"), path)
		assert.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline", path)
		assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
		assert.Equal(t, "DENY", h.Get("X-Frame-Options"), path)
		assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"), path)
	}
}

func TestAnonymousVisitorsSeeNothing(t *testing.T) {
	ts, _ := testServer(t, sampleBook(t))
	c := browser(t)
	for _, path := range []string{"/", "/claims/claim-0042", "/claims/claim-0042/documents/0"} {
		res, err := c.Get(ts.URL + path)
		require.NoError(t, err)
		body(t, res)
		assert.Equal(t, http.StatusSeeOther, res.StatusCode, path)
		assert.Equal(t, "/login", res.Header.Get("Location"), path)
	}
	res, err := c.Get(ts.URL + "/claims/claim-0042/live")
	require.NoError(t, err)
	body(t, res)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, err = c.PostForm(ts.URL+"/claims/claim-0042/decide", url.Values{"action": {"approve"}})
	require.NoError(t, err)
	body(t, res)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

func TestSessionCookiesAreSignedHttpOnlyAndSameSite(t *testing.T) {
	ts, ck := testServer(t, sampleBook(t))
	c := browser(t)
	devSignIn(t, c, ts.URL, "adjuster-17")
	u, _ := url.Parse(ts.URL)
	var sess *http.Cookie
	for _, k := range c.Jar.Cookies(u) {
		if k.Name == "inbox_session" {
			sess = k
		}
	}
	require.NotNil(t, sess)

	// The Set-Cookie attributes, as the browser gets them.
	rec := httptest.NewRecorder()
	require.NoError(t, ck.startSession(rec, "adjuster-17", true))
	set := rec.Result().Cookies()[0]
	assert.True(t, set.HttpOnly)
	assert.Equal(t, http.SameSiteLaxMode, set.SameSite)

	// A session another key signed, or one edited to name someone else, is
	// no session.
	other, err := newCookies([]byte(strings.Repeat("x", 32)), false)
	require.NoError(t, err)
	rec = httptest.NewRecorder()
	require.NoError(t, other.startSession(rec, "supervisor-3", false))
	forged := rec.Result().Cookies()[0]
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(forged)
	_, ok := ck.session(r)
	assert.False(t, ok, "a cookie signed with another key")

	parts := strings.Split(sess.Value, ".")
	require.Len(t, parts, 3)
	r = httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: "inbox_session", Value: parts[0] + "." + strings.TrimSuffix(parts[1], "A") + "B." + parts[2]})
	_, ok = ck.session(r)
	assert.False(t, ok, "an edited cookie")

	// An expired one.
	ck.now = func() time.Time { return time.Now().Add(sessionTTL + time.Minute) }
	r = httptest.NewRequest("GET", "/", nil)
	r.AddCookie(sess)
	_, ok = ck.session(r)
	assert.False(t, ok, "an expired session")
}

// TestFormsWithoutTheSessionTokenAreRefused: SameSite=Lax keeps the cookie
// off cross-site posts, but not off posts from a sibling subdomain (the
// same "site") or from browsers that ignore SameSite; without the form
// token from the session a post is refused before anything else runs.
func TestFormsWithoutTheSessionTokenAreRefused(t *testing.T) {
	ts, _ := testServer(t, sampleBook(t))
	c := browser(t)
	devSignIn(t, c, ts.URL, "adjuster-17")
	for _, token := range []string{"", "guess"} {
		res, err := c.PostForm(ts.URL+"/claims/claim-0042/decide", url.Values{"csrf": {token}, "action": {"approve"}})
		require.NoError(t, err)
		assert.Contains(t, body(t, res), "form token")
		assert.Equal(t, http.StatusForbidden, res.StatusCode)
	}
	res, err := c.PostForm(ts.URL+"/logout", url.Values{})
	require.NoError(t, err)
	body(t, res)
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "sign-out needs the token too")
}

func TestDevelopmentSignInNeedsItsOwnFormToken(t *testing.T) {
	ts, _ := testServer(t, sampleBook(t))
	c := browser(t)
	res, err := c.PostForm(ts.URL+"/dev-login", url.Values{"approver": {"supervisor-3"}})
	require.NoError(t, err)
	body(t, res)
	assert.Equal(t, http.StatusForbidden, res.StatusCode)

	// Someone not in the directory cannot be chosen.
	res, err = c.Get(ts.URL + "/login")
	require.NoError(t, err)
	m := hidden.FindStringSubmatch(body(t, res))
	require.NotNil(t, m)
	res, err = c.PostForm(ts.URL+"/dev-login", url.Values{"token": {m[1]}, "approver": {"mallory"}})
	require.NoError(t, err)
	assert.Contains(t, body(t, res), "choose an approver")
	assert.Equal(t, http.StatusOK, res.StatusCode)
	u, _ := url.Parse(ts.URL)
	for _, k := range c.Jar.Cookies(u) {
		assert.NotEqual(t, "inbox_session", k.Name)
	}
}

func TestApproversRemovedFromTheDirectoryAreSignedOut(t *testing.T) {
	book := sampleBook(t)
	ck, err := newCookies([]byte(strings.Repeat("k", 32)), false)
	require.NoError(t, err)
	current := book
	s := &server{log: slog.New(slog.DiscardHandler), cookies: ck, directory: func() (authority.Book, error) { return current, nil }}
	s.pages, err = parsePages()
	require.NoError(t, err)
	s.routes()
	ts := httptest.NewServer(s)
	defer ts.Close()
	c := browser(t)
	devSignIn(t, c, ts.URL, "adjuster-9")

	var left authority.Directory
	for _, a := range book.Approvers {
		if a.ID != "adjuster-9" {
			left = append(left, a)
		}
	}
	current = authority.Book{Approvers: left, Services: book.Services}
	res, err := c.Get(ts.URL + "/claims/claim-0042")
	require.NoError(t, err)
	assert.Contains(t, body(t, res), "no longer an approver")
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
}

func TestIdentitiesMapToApproversBySubjectOrVerifiedEmail(t *testing.T) {
	d := sampleBook(t).Approvers
	ap, ok := approverFor(d, "adjuster-17", "", false)
	assert.True(t, ok)
	assert.Equal(t, "adjuster-17", ap.ID)
	ap, ok = approverFor(d, "00u1abc", "Supervisor3@insurer.example", true)
	assert.True(t, ok)
	assert.Equal(t, "supervisor-3", ap.ID)
	_, ok = approverFor(d, "00u1abc", "supervisor3@insurer.example", false)
	assert.False(t, ok, "an e-mail the provider has not verified names nobody")
	_, ok = approverFor(d, "00u1abc", "someone@else.example", true)
	assert.False(t, ok)
}

func TestDevelopmentSignInIsRefusedOffLoopback(t *testing.T) {
	env := map[string]string{"INBOX_DEV_LOGIN": "1", "INBOX_ADDR": "0.0.0.0:8088"}
	err := run(context.Background(), slog.New(slog.DiscardHandler), func(k string) string { return env[k] })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loopback")

	env["INBOX_ADDR"] = "192.168.1.20:8088"
	err = run(context.Background(), slog.New(slog.DiscardHandler), func(k string) string { return env[k] })
	require.ErrorContains(t, err, "loopback")

	for _, addr := range []string{"localhost:8088", "127.0.0.1:0", "[::1]:8088"} {
		assert.True(t, config.IsLoopback(addr), addr)
	}
	for _, addr := range []string{":8088", "0.0.0.0:8088", "example.com:80", "localhost"} {
		assert.False(t, config.IsLoopback(addr), addr)
	}
}

func TestProductionNeedsAnIdentityProviderAndASharedSessionKey(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "OIDC_ISSUER"},
		{map[string]string{"INBOX_DEV_LOGIN": "1", "OIDC_ISSUER": "https://id.example"}, "choose one"},
		{map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_CLIENT_ID": "inbox"}, "INBOX_SESSION_KEY is required"},
		{map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_CLIENT_ID": "inbox", "INBOX_SESSION_KEY": "c2hvcnQ="}, "at least 32 bytes"},
		{map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_CLIENT_ID": "inbox", "INBOX_SESSION_KEY": "not base64!"}, "base64"},
		{map[string]string{"INBOX_URL": "ftp://x"}, "INBOX_URL"},
	}
	for _, c := range cases {
		err := run(context.Background(), slog.New(slog.DiscardHandler), func(k string) string { return c.env[k] })
		require.Error(t, err, c.env)
		assert.Contains(t, err.Error(), c.want, c.env)
	}
}

// Only who could decide a claim, or took part in it, sees it: a limit
// below the amount, or an adjuster on an escalated claim, sees nothing.
func TestOnlyWhoCouldDecideOrTookPartSeesAClaim(t *testing.T) {
	book := sampleBook(t)
	who := func(id string) authority.Approver { a, _ := book.Approvers.Find(id); return a }
	big := workflows.Status{Approval: &approvals.Approval{Request: approvals.Request{ClaimID: "claim-1", AmountMinor: 900000, Currency: "usd"},
		Stage: approvals.StageWaiting}}
	assert.False(t, mayView(who("adjuster-9"), big), "limit 1,500.00, claim 9,000.00")
	assert.False(t, mayView(who("adjuster-17"), big), "limit 5,000.00")
	assert.True(t, mayView(who("supervisor-3"), big))
	small := workflows.Status{Approval: &approvals.Approval{Request: approvals.Request{ClaimID: "claim-2", AmountMinor: 120000, Currency: "usd"},
		Stage: approvals.StageWaiting}}
	assert.True(t, mayView(who("adjuster-9"), small))
	small.Approval.Stage = approvals.StageEscalated
	assert.False(t, mayView(who("adjuster-9"), small), "escalated: supervisors decide")
	small.Attempts = []approvals.Attempt{{Approver: "adjuster-9", Accepted: true}}
	assert.True(t, mayView(who("adjuster-9"), small), "took part")
	big.Approval.Handoffs = []approvals.HandedOn{{From: "supervisor-3", To: "adjuster-17"}}
	assert.True(t, mayView(who("adjuster-17"), big), "was handed it")
	assert.False(t, mayView(who("adjuster-17"), workflows.Status{}), "nothing waits")
}

// A form's outcome reaches only the page it redirects to, once; a link
// cannot put words into a page's notice or alert.
func TestAnOutcomeIsShownOnceOnItsOwnPage(t *testing.T) {
	ck, err := newCookies([]byte(strings.Repeat("k", 32)), false)
	require.NoError(t, err)
	set := httptest.NewRecorder()
	require.NoError(t, ck.setFlash(set, flash{Path: "/claims/claim-1", Notice: "Approved: receipt 1234abcd accepted by the claim"}))
	carrying := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/claims/claim-1", nil)
		for _, c := range set.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}

	w := httptest.NewRecorder()
	assert.Zero(t, ck.takeFlash(w, carrying(), "/claims/claim-2"), "another claim's page shows nothing")
	w = httptest.NewRecorder()
	got := ck.takeFlash(w, carrying(), "/claims/claim-1")
	assert.Equal(t, "Approved: receipt 1234abcd accepted by the claim", got.Notice)
	cleared := w.Result().Cookies()
	require.Len(t, cleared, 1)
	assert.Negative(t, cleared[0].MaxAge, "shown once: the cookie is cleared")

	forged := httptest.NewRequest(http.MethodGet, "/claims/claim-1?notice=Approved&problem=call+555-0100", nil)
	forged.AddCookie(&http.Cookie{Name: set.Result().Cookies()[0].Name, Value: "eyJwYXRoIjoiL2NsYWltcy9jbGFpbS0xIn0"})
	assert.Zero(t, ck.takeFlash(httptest.NewRecorder(), forged, "/claims/claim-1"), "an unsigned cookie, and the URL, say nothing")

	long := httptest.NewRecorder()
	require.NoError(t, ck.setFlash(long, flash{Path: "/claims/claim-1", Problem: strings.Repeat("é", 5000)}))
	for _, c := range long.Result().Cookies() {
		assert.Less(t, len(c.String()), 4096, "a long refusal still fits a cookie")
	}
}

// A request is handed on only to someone who could decide it and is not
// the claimant: adjuster-9's limit is 1,500.00, the claim is 1,840.00.
func TestARequestIsHandedOnlyToWhoCouldDecideIt(t *testing.T) {
	book := sampleBook(t)
	me, _ := book.Approvers.Find("adjuster-17")
	v := viewer{Approver: me, book: book}
	st := workflows.Status{State: workflows.StatusWaiting, Approval: &approvals.Approval{
		Request: approvals.Request{ClaimID: "claim-1", AmountMinor: 184000, Currency: "usd"}, Stage: approvals.StageWaiting}}
	ids := func(as []authority.Approver) (out []string) {
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	assert.Equal(t, []string{"supervisor-3"}, ids(colleagues(v, st, claim.Claimant{Email: "ada@example.com"})))
	assert.Empty(t, colleagues(v, st, claim.Claimant{Email: "Supervisor3@insurer.example"}), "never to the claimant")
	st.Approval.Request.AmountMinor = 120000
	assert.Equal(t, []string{"adjuster-9", "supervisor-3"}, ids(colleagues(v, st, claim.Claimant{})))
}

// The page has one format for money: the workflow's reasons and the
// model's rationale are shown with their amounts as Money writes them, in
// the approver's locale; other numbers, and other currencies, stay.
func TestReasonsShowAmountsInTheApproversFormat(t *testing.T) {
	en := newFormat(authority.Approver{}, "en-GB")
	assert.Equal(t, "payout USD 1,840.00 is above the auto-approve limit USD 1,000.00",
		en.Text("payout 1840.00 is above the auto-approve limit 1000.00", "usd"))
	assert.Equal(t, "0 fraud signal(s); 3 prior claim(s); recommend USD 1,840.00",
		en.Text("0 fraud signal(s); 3 prior claim(s); recommend 1840.00 USD", "usd"))
	assert.Equal(t, "a quote of 1840.00 EUR, score 0.5", en.Text("a quote of 1840.00 EUR, score 0.5", "usd"), "not an amount in the claim's currency")
	de := newFormat(authority.Approver{Locale: "de-DE"}, "")
	assert.Equal(t, "payout EUR 1.840,00", de.Text("payout 1840.00", "eur"))
	assert.Equal(t, "ten 10.000", de.Text("ten 10.000", "jpy"), "JPY has no minor unit: not an amount")
}

func TestTracedRequestsLeaveOutPollingAndStaticFiles(t *testing.T) {
	for path, want := range map[string]bool{"/": true, "/claims/claim-1": true, "/claims/claim-1/decide": true,
		"/claims/claim-1/live": false, "/healthz": false, "/static/inbox.css": false} {
		assert.Equal(t, want, traceRequest(httptest.NewRequest(http.MethodGet, path, nil)), path)
	}
}
