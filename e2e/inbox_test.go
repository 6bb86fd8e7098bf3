package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/testbed/unitguard"
	"github.com/durableclaims/durableclaims/workflows"
)

// browserWorld is a world with the adjuster inbox running as a real
// process, signing in through an OIDC provider running in the test, and a
// real Chromium to drive it.
type browserWorld struct {
	*world
	inbox string // its URL
	oidc  *mockoidc.MockOIDC
	alloc context.Context
}

// emails are the directory's addresses of the sample approvers.
var emails = map[string]string{"adjuster-17": "adjuster17@insurer.example", "adjuster-9": "adjuster9@insurer.example",
	"supervisor-3": "supervisor3@insurer.example"}

func newBrowserWorld(t *testing.T) *browserWorld {
	return newBrowserWorldWith(t, nil)
}

// newBrowserWorldWith is newBrowserWorld with env added for every program
// and the worker started with workerArgs. Links to a claim's trace are the
// inbox's own trace page.
func newBrowserWorldWith(t *testing.T, env []string, workerArgs ...string) *browserWorld {
	w := newWorld(t)
	w.env = append(w.env, env...)
	b := &browserWorld{world: w}
	dir := t.TempDir()
	key := filepath.Join(dir, "inbox.key")
	out, err := w.ctl("keygen", "--service", "inbox", "--out", key, "--directory", envValue(w.env, "APPROVERS_FILE"))
	require.NoError(t, err, out)

	b.oidc, err = mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.oidc.Shutdown() })
	cfg := b.oidc.Config()

	addr := freePort(t)
	b.inbox = "http://" + addr
	w.env = append(w.env, "INBOX_URL="+b.inbox, "TRACE_URL_TEMPLATE="+b.inbox+"/traces/{trace_id}")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"), workerArgs...)
	sessionKey := make([]byte, 32)
	_, _ = rand.Read(sessionKey)
	testenv.Supervise(t, append(append([]string{}, w.env...), "INBOX_ADDR="+addr, "INBOX_SIGNING_KEY="+key,
		"INBOX_SESSION_KEY="+base64.StdEncoding.EncodeToString(sessionKey),
		"OIDC_ISSUER="+cfg.Issuer, "OIDC_CLIENT_ID="+cfg.ClientID, "OIDC_CLIENT_SECRET="+cfg.ClientSecret), filepath.Join(w.bin, "inbox"))
	require.Eventually(t, func() bool {
		resp, err := http.Get(b.inbox + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, testTimeout, pollEvery, "the inbox never served")

	require.NoError(t, unitguard.Refuse("Chromium"))
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "Debian's chromium package is needed: apt-get install -y chromium")
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancel)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(browser), "start chromium")
	b.alloc = browser
	return b
}

// signIn opens a browser of its own for approver and signs in through the
// identity provider.
func (b *browserWorld) signIn(approver string) context.Context {
	ctx, cancel := chromedp.NewContext(b.alloc, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	b.t.Cleanup(cancelTimeout)
	b.oidc.QueueUser(&mockoidc.MockUser{Subject: "idp-" + approver, Email: emails[approver], EmailVerified: true})
	require.NoError(b.t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+"/"), chromedp.WaitVisible(chromedp.CSS("h1"))))
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".who")))
	require.NoError(b.t, err)
	require.Contains(b.t, who, approver, "signed in through the identity provider, mapped by e-mail")
	return ctx
}

func (b *browserWorld) text(ctx context.Context, css string) string {
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	require.NoError(b.t, err, css)
	return s
}

// follow waits until the claim's page, following it live, shows state.
func (b *browserWorld) follow(ctx context.Context, state string) {
	require.Eventually(b.t, func() bool {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#live p")))
		return err == nil && strings.Contains(s, "State: "+state)
	}, time.Minute, 500*time.Millisecond, "the page never showed %s", state)
}

func (b *browserWorld) open(ctx context.Context, id string) {
	require.NoError(b.t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+"/claims/"+id), chromedp.WaitVisible(chromedp.CSS("#live"))))
}

// claimFileWithDocuments is claimFile with the demo's own documents
// (examples/docs): a photo of the kitchen (a JPEG) and the plumber's
// invoice (a one-page PDF), which the claim page shows in place.
func (b *browserWorld) claimFileWithDocuments(id, amount string) string {
	dir := b.t.TempDir()
	for _, name := range demoDocuments {
		doc, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(b.t), "examples", "docs", name))
		require.NoError(b.t, err)
		require.NoError(b.t, os.WriteFile(filepath.Join(dir, name), doc, 0o644))
	}
	path := filepath.Join(dir, id+".json")
	doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001","claimant":{"name":"Ada Lovelace","email":"ada@example.com","stripe_account":"acct_1Ada"},
		"amount":%q,"currency":"usd","description":"A burst pipe flooded the kitchen overnight",
		"documents":[{"name":%q,"path":%[3]q},{"name":%[4]q,"path":%[4]q}]}`, id, amount, demoDocuments[0], demoDocuments[1])
	require.NoError(b.t, os.WriteFile(path, []byte(doc), 0o644))
	return path
}

// demoDocuments are the photo and the PDF of the demo's claim-0042.
var demoDocuments = []string{"kitchen.jpg", "plumber-invoice.pdf"}

// documentsShown checks the claim page shows its documents as what they
// are: the photo decoded to its width in pixels, and in the frame the PDF
// itself, served as application/pdf, byte for byte the shipped file
// (examples' test checks it opens: header, cross-references, one page).
func (b *browserWorld) documentsShown(ctx context.Context) {
	b.t.Helper()
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`new Promise(done => {
		const img = document.querySelector("#documents img");
		if (img.complete) { done(img.naturalWidth); return; }
		img.onload = () => done(img.naturalWidth); img.onerror = () => done(-1);
	})`, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err)
	assert.Equal(b.t, 160, width, "the photo itself is on the page, decoded")
	type served struct{ Type, Body string } // Body: one character per byte
	pdf, err := chromedp.Run(ctx, chromedp.Evaluate[served](`(async () => {
		const r = await fetch(document.querySelector("#documents iframe").src);
		const bytes = new Uint8Array(await r.arrayBuffer());
		return {type: r.headers.get("Content-Type"), body: String.fromCharCode(...bytes)};
	})()`, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err)
	assert.True(b.t, strings.HasPrefix(pdf.Body, "%PDF-1."), "a PDF header: %.20q", pdf.Body)
	shipped, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(b.t), "examples", "docs", demoDocuments[1]))
	require.NoError(b.t, err)
	body := make([]rune, len(shipped))
	for i, c := range shipped {
		body[i] = rune(c)
	}
	assert.Equal(b.t, served{Type: "application/pdf", Body: string(body)}, pdf, "the invoice in the page's frame is the PDF itself")
}

func (b *browserWorld) screenshot(ctx context.Context, name string) {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	dir := filepath.Join(testenv.ModuleRoot(b.t), "var", "screenshots")
	require.NoError(b.t, os.MkdirAll(dir, 0o755))
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// An adjuster signs in through the identity provider, finds claims in
// their inbox, and approves, rejects, approves a lower amount; a
// four-eyes claim is decided by two people; a stale page is refused; a
// form post without its token is refused. Every decision is a receipt the
// inbox signs, checked by the workflow; money moves once.
func TestInboxInABrowser(t *testing.T) {
	b := newBrowserWorld(t)
	ids := map[string]string{"approve": "claim-e2e-web-approve", "reject": "claim-e2e-web-reject", "lower": "claim-e2e-web-lower",
		"stale": "claim-e2e-web-stale", "forged": "claim-e2e-web-forged"}
	for name, id := range ids {
		file := b.claimFile(id, "1840.00")
		if name == "approve" {
			file = b.claimFileWithDocuments(id, "1840.00")
		}
		b.start(file)
	}
	quorum := "claim-e2e-web-quorum"
	b.start("--four-eyes-above", "1500.00", b.claimFile(quorum, "1840.00"))
	for _, id := range append([]string{quorum}, ids["approve"], ids["reject"], ids["lower"], ids["stale"], ids["forged"]) {
		b.waitStatus(id, workflows.StatusWaiting)
	}

	adjuster := b.signIn("adjuster-17")
	list := b.text(adjuster, ".claims")
	for _, id := range ids {
		assert.Contains(t, list, id, "the inbox lists what waits for adjuster-17")
	}
	assert.Contains(t, list, "Escalates")
	b.screenshot(adjuster, "inbox-desktop")
	require.NoError(t, chromedp.Do(adjuster, chromedp.EmulateViewport(390, 844)))
	b.screenshot(adjuster, "inbox-phone")
	require.NoError(t, chromedp.Do(adjuster, chromedp.EmulateViewport(1280, 900)))

	// Approve: paid, one transfer, followed live on the page. Before the
	// forms the adjuster reads what happened in the claimant's words, the
	// policy, the photo itself, the model's advice and the history.
	b.open(adjuster, ids["approve"])
	page := b.text(adjuster, "main")
	for _, want := range []string{"A burst pipe flooded the kitchen overnight", "In the claimant's own words", "pol-1001", "deductible",
		"kitchen.jpg", "plumber-invoice.pdf", "The model's advice", "Advice, not authority", "2 turns, 3 tool calls", "History", "a decision was requested",
		"The request you sign", "Ada Lovelace", "acct_1Ada", "covered", "payout USD 1,840.00 is above the auto-approve limit USD 1,000.00", "Request SHA-256"} {
		assert.Contains(t, page, want)
	}
	b.documentsShown(adjuster)
	above, err := chromedp.Run(adjuster, chromedp.Evaluate[bool](`(() => {
		const top = s => document.querySelector(s).getBoundingClientRect().top;
		return ["#happened", "#policy", "#documents img", "#advice", "#history"].every(s => top(s) < top("#decide-h"));
	})()`))
	require.NoError(t, err)
	assert.True(t, above, "the claimant's words, the policy, the photo, the advice and the history come before the forms")
	handTo := b.text(adjuster, "#handoff-to")
	assert.Contains(t, handTo, "supervisor-3")
	assert.NotContains(t, handTo, "adjuster-9", "adjuster-9's limit is 1,500.00: not offered a 1,840.00 claim")

	// A link cannot put words into the page: its notice and alert come only
	// from the inbox's own redirect after a form.
	require.NoError(t, chromedp.Do(adjuster, chromedp.Navigate(b.inbox+"/claims/"+ids["approve"]+"?problem=Call+555-0100+to+confirm&notice=Approved"),
		chromedp.WaitVisible(chromedp.CSS("#live"))))
	none, err := chromedp.Run(adjuster, chromedp.Evaluate[bool](`document.querySelector(".problem, .notice") === null && !document.body.innerText.includes("555-0100")`))
	require.NoError(t, err)
	assert.True(t, none, "words from the URL are not shown")
	b.screenshot(adjuster, "claim-desktop")
	require.NoError(t, chromedp.Do(adjuster, chromedp.EmulateViewport(390, 844)))
	b.screenshot(adjuster, "claim-phone")
	require.NoError(t, chromedp.Do(adjuster, chromedp.EmulateViewport(1280, 900)))
	require.NoError(t, chromedp.Do(adjuster, chromedp.SendKeys(chromedp.CSS("#approve-note"), "invoice checks out"),
		chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	assert.Contains(t, b.text(adjuster, ".notice"), "Approved")
	b.follow(adjuster, "paid")
	hidden, err := chromedp.Run(adjuster, chromedp.Evaluate[bool](`[...document.querySelectorAll(".while-waiting")].every(e => e.offsetParent === null)`))
	require.NoError(t, err)
	assert.True(t, hidden, "once paid, the page shows no stage, deadlines or forms of a request still waiting")
	r := b.result(ids["approve"])
	assert.Equal(t, workflows.StatusPaid, r.Status)
	assert.Equal(t, "inbox", r.Approval.Decision.VouchedBy, "the inbox's service key vouched for the signed-in approver")
	assert.Equal(t, "adjuster-17", r.Approval.Decision.Approver)
	n, total := b.transfers(ids["approve"])
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)

	// Reject, with a reason.
	b.open(adjuster, ids["reject"])
	require.NoError(t, chromedp.Do(adjuster, chromedp.SendKeys(chromedp.CSS("#reject-reason"), "the invoice is for another address"),
		chromedp.Click(chromedp.CSS("#reject")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	b.follow(adjuster, "rejected")
	assert.Contains(t, b.result(ids["reject"]).Reason, "the invoice is for another address")
	n, _ = b.transfers(ids["reject"])
	assert.Zero(t, n)

	// A lower amount, with a reason: paid that much.
	b.open(adjuster, ids["lower"])
	require.NoError(t, chromedp.Do(adjuster, chromedp.SendKeys(chromedp.CSS("#lower-amount"), "1500.00"),
		chromedp.SendKeys(chromedp.CSS("#lower-reason"), "the plumber's invoice says 1500.00"),
		chromedp.Click(chromedp.CSS("#lower")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	b.follow(adjuster, "paid")
	n, total = b.transfers(ids["lower"])
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(150000), total, "paid the approved amount")

	// Four eyes: adjuster-17 first, then supervisor-3 in a browser of their own.
	b.open(adjuster, quorum)
	require.NoError(t, chromedp.Do(adjuster, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	assert.Contains(t, b.text(adjuster, ".quorum"), "1 of 2 approvals")
	assert.Contains(t, b.text(adjuster, ".why-not"), "a second approver must agree")
	n, _ = b.transfers(quorum)
	assert.Zero(t, n, "one approver alone pays nothing")
	supervisor := b.signIn("supervisor-3")
	assert.Contains(t, b.text(supervisor, ".claims"), quorum)
	b.open(supervisor, quorum)
	require.NoError(t, chromedp.Do(supervisor, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	b.follow(supervisor, "paid")
	r = b.result(quorum)
	require.Len(t, r.Approval.Votes, 2)
	assert.Equal(t, []string{"adjuster-17", "supervisor-3"}, []string{r.Approval.Votes[0].Approver, r.Approval.Votes[1].Approver})
	n, _ = b.transfers(quorum)
	assert.Equal(t, 1, n)

	// A stale page: adjuster-17 has the request open; the claim is amended,
	// its run told, the old request voided and a new one raised at once;
	// the page's approval is refused as stale.
	b.open(adjuster, ids["stale"])
	out, err := b.ctl("amend", ids["stale"], "--by", "adjuster-9", "--amount", "1900.00")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		s := b.status(ids["stale"])
		return s.State == workflows.StatusWaiting && s.Approval.Request.Amount == "1900.00"
	}, testTimeout, pollEvery)
	require.NoError(t, chromedp.Do(adjuster, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".problem"))))
	assert.Contains(t, b.text(adjuster, ".problem"), "stale decision")
	n, _ = b.transfers(ids["stale"])
	assert.Zero(t, n)

	// A forged post: the session cookie rides along (same site), the form
	// token does not. Refused, nothing decided.
	b.open(adjuster, ids["forged"])
	sum := b.status(ids["forged"]).Approval.RequestSHA256
	status, err := chromedp.Run(adjuster, chromedp.Evaluate[int](fmt.Sprintf(`fetch("/claims/%s/decide", {method: "POST",
		body: new URLSearchParams({action: "approve", request_sha256: %q})}).then(r => r.status)`, ids["forged"], sum), chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, workflows.StatusWaiting, b.status(ids["forged"]).State, "the forged post decided nothing")
	assert.Empty(t, b.status(ids["forged"]).Attempts, "it never reached the claim")

	// Hand the same claim to a colleague: recorded, on top of their inbox,
	// the deadline unchanged; the colleague can decide it.
	before := b.status(ids["forged"]).Approval.Deadline
	b.open(adjuster, ids["forged"])
	require.NoError(t, chromedp.Do(adjuster, chromedp.SetValue(chromedp.CSS("#handoff-to"), "supervisor-3"),
		chromedp.SendKeys(chromedp.CSS("#handoff-note"), "I know the claimant"),
		chromedp.Click(chromedp.CSS("#handoff")), chromedp.WaitVisible(chromedp.CSS(".notice"))))
	assert.Contains(t, b.text(adjuster, ".notice"), "Handed to supervisor-3")
	st := b.status(ids["forged"])
	assert.Equal(t, "supervisor-3", st.Approval.AssignedTo())
	assert.Equal(t, before, st.Approval.Deadline, "a hand-off does not reset the clock")
	require.NoError(t, chromedp.Do(supervisor, chromedp.Navigate(b.inbox+"/"), chromedp.WaitVisible(chromedp.CSS(".claims"))))
	first := b.text(supervisor, ".claims li:first-child")
	assert.Contains(t, first, ids["forged"])
	assert.Contains(t, first, "Handed to you")
	b.open(supervisor, ids["forged"])
	assert.Contains(t, b.text(supervisor, "#history"), "adjuster-17 → supervisor-3: I know the claimant")
	out, err = b.ctl("show", ids["forged"])
	require.NoError(t, err, out)
	assert.Contains(t, out, "handed on by adjuster-17 to supervisor-3")

	// Temporal forgets the approved claim's run: its page is read from the
	// claim file, the photo with it.
	out, err = b.cli("workflow", "delete", "--workflow-id", ids["approve"])
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := b.cli("workflow", "describe", "--workflow-id", ids["approve"])
		return err != nil
	}, testTimeout, pollEvery, "the run's history is deleted")
	b.open(adjuster, ids["approve"])
	page = b.text(adjuster, "main")
	for _, want := range []string{"Read from the claim's file", "the run's history is gone from Temporal", "Approved by adjuster-17",
		"A burst pipe flooded the kitchen overnight", "Ada Lovelace", "acct_1Ada", "kitchen.jpg", "2 turns, 3 tool calls"} {
		assert.Contains(t, page, want)
	}
	b.documentsShown(adjuster) // the documents still show
}

// An adjuster signed in to the inbox sees only the claims they could decide
// or took part in: adjuster-9 (limit 1,500.00) and adjuster-17 (5,000.00)
// opening a 9,000.00 claim get a refusal with no payee, no documents and no
// claimant in it, and its document stays closed to them; a supervisor
// whose limit covers it sees it.
func TestAttackAnAdjusterCannotOpenAClaimAboveTheirLimit(t *testing.T) {
	b := newBrowserWorld(t)
	id := "claim-e2e-web-big"
	b.start(b.claimFile(id, "9000.00"))
	b.waitStatus(id, workflows.StatusWaiting)
	for _, who := range []string{"adjuster-9", "adjuster-17"} {
		ctx := b.signIn(who)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+"/claims/"+id), chromedp.WaitVisible(chromedp.CSS("main"))))
		page := b.text(ctx, "main")
		assert.Contains(t, page, "not for you", who)
		for _, secret := range []string{"Ada Lovelace", "acct_1Ada", "a.jpg", "9000.00"} {
			assert.NotContains(t, page, secret, "%s saw %s", who, secret)
		}
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+"/claims/"+id+"/documents/0"), chromedp.WaitVisible(chromedp.CSS("main"))))
		assert.Contains(t, b.text(ctx, "main"), "not for you", "%s: the document is closed too", who)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+"/"), chromedp.WaitVisible(chromedp.CSS("main"))))
		assert.NotContains(t, b.text(ctx, "main"), id, "%s: not listed either", who)
	}
	sup := b.signIn("supervisor-3")
	b.open(sup, id)
	assert.Contains(t, b.text(sup, "main"), "Ada Lovelace")

	// After Temporal forgets the run the page is read from the claim file,
	// and the same rule holds: the supervisor who rejected it sees it, the
	// adjusters still do not, nor its document.
	out, err := b.decideRaw(id, b.receipt("reject", id, "supervisor-3", "--reason", "the invoice is forged"))
	require.NoError(t, err, out)
	require.Equal(t, workflows.StatusRejected, b.result(id).Status)
	out, err = b.cli("workflow", "delete", "--workflow-id", id)
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := b.cli("workflow", "describe", "--workflow-id", id)
		return err != nil
	}, testTimeout, pollEvery, "the run's history is deleted")
	b.open(sup, id)
	assert.Contains(t, b.text(sup, "main"), "Read from the claim's file")
	for _, who := range []string{"adjuster-9", "adjuster-17"} {
		ctx := b.signIn(who)
		for _, path := range []string{"/claims/" + id, "/claims/" + id + "/documents/0", "/claims/" + id + "/documents/0/view"} {
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(b.inbox+path), chromedp.WaitVisible(chromedp.CSS("main"))))
			page := b.text(ctx, "main")
			assert.Contains(t, page, "not for you", "%s %s", who, path)
			for _, secret := range []string{"Ada Lovelace", "acct_1Ada", "a.jpg", "9000.00", "forged"} {
				assert.NotContains(t, page, secret, "%s saw %s at %s", who, secret, path)
			}
		}
	}

	// A claim file edited in the blob store is not shown as the record.
	files := b.claimFiles(id)
	require.Len(t, files, 1)
	body, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.NoError(t, os.Chmod(files[0], 0o600))
	require.NoError(t, os.WriteFile(files[0], []byte(strings.Replace(string(body), "the invoice is forged", "the invoice is fine!!", 1)), 0o600))
	require.NoError(t, chromedp.Do(sup, chromedp.Navigate(b.inbox+"/claims/"+id), chromedp.WaitVisible(chromedp.CSS("main"))))
	page := b.text(sup, "main")
	assert.Contains(t, page, "the claim's file does not verify")
	assert.NotContains(t, page, "the invoice is fine")
}
