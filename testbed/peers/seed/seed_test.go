package seed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func claim(amount int64) Claim {
	var c Claim
	c.ClaimID, c.PolicyID, c.AmountMinor, c.Currency = "c-1", "pol-1001", amount, "usd"
	c.Claimant.Name, c.Claimant.StripeAccount = "Ada", "acct_1Ada"
	return c
}

func TestIntakeRefusesWhatTheContractRefuses(t *testing.T) {
	if err := claim(100).Validate(); err != nil {
		t.Fatalf("a good claim: %v", err)
	}
	for name, mutate := range map[string]func(*Claim){
		"no claim_id":     func(c *Claim) { c.ClaimID = "" },
		"path as account": func(c *Claim) { c.Claimant.StripeAccount = "../etc/passwd" },
		"zero amount":     func(c *Claim) { c.AmountMinor = 0 },
		"upper currency":  func(c *Claim) { c.Currency = "USD" },
	} {
		c := claim(100)
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCoverageAndPayout(t *testing.T) {
	cov := Cover(claim(2_000_000))
	if !cov.Covered || cov.CoveredMinor != 1_000_000 {
		t.Fatalf("over the limit: %+v", cov)
	}
	if got := Payout(Assessment{RecommendedMinor: 5_000_000}, cov); got != 1_000_000 {
		t.Errorf("a recommendation above the cover pays %d", got)
	}
	if got := Payout(Assessment{RecommendedMinor: -5}, cov); got != 0 {
		t.Errorf("a negative recommendation pays %d", got)
	}
	if c := claim(100); Cover(Claim{PolicyID: "pol-9", Currency: c.Currency, AmountMinor: 100}).Covered {
		t.Error("an unknown policy is covered")
	}
}

func TestPaySendsTheKeyAndSortsRefusals(t *testing.T) {
	status := http.StatusOK
	var key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key = r.Header.Get("Idempotency-Key")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"id":"tr_1"}`))
	}))
	defer srv.Close()
	w := &World{Config: Config{StripeURL: srv.URL, StripeKey: "sk"}, HTTP: srv.Client()}
	tr, err := w.Pay(context.Background(), claim(100), 100)
	if err != nil || tr.ID != "tr_1" || !tr.Replayed || key != "c-1:step6" {
		t.Fatalf("paid %+v, %v, key %q", tr, err, key)
	}
	for code, perm := range map[int]bool{http.StatusBadRequest: true, http.StatusTooManyRequests: false, http.StatusConflict: false, http.StatusBadGateway: false} {
		status = code
		_, err := w.Pay(context.Background(), claim(100), 100)
		if err == nil || IsPermanent(err) != perm {
			t.Errorf("%d: %v, permanent %v", code, err, IsPermanent(err))
		}
	}
}

func TestARepeatedEmailIsASecondFile(t *testing.T) {
	dir := t.TempDir()
	w := &World{Config: Config{MailSpool: dir}}
	for range 2 {
		if _, err := w.Notify(claim(100), View{ClaimID: "c-1", Status: StatusPaid, PayoutMinor: 100, TransferID: "tr_1"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"c-1.eml", "c-1.2.eml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}
