// Package authority is the approver directory: who may decide claims, in
// which role, up to which amount, and which keys may sign their decision
// receipts. It is data, read by an activity and recorded in history when an
// approval opens, so the rules that check a decision, signatures included,
// are deterministic workflow code.
package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // time zone names resolve on any host

	"golang.org/x/text/language"

	_ "embed"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Role is what an approver may do.
type Role string

const (
	// Adjuster decides claims while they wait, up to their limit.
	Adjuster Role = "adjuster"
	// Supervisor decides at any stage, including escalated claims.
	Supervisor Role = "supervisor"
)

// Approver is one entry of the directory.
type Approver struct {
	ID    string `json:"id"`
	Role  Role   `json:"role"`
	Email string `json:"email"`
	// Limits is the largest amount the approver may approve, per currency,
	// in minor units. No entry for a currency means no authority in it.
	Limits map[string]int64 `json:"limits_minor"`
	// Emails are the approver's other e-mail addresses and PayoutAccounts
	// the payout accounts that are theirs: a claim paying any of them, or
	// filed from any of them, is their own, which they may not decide.
	Emails         []string `json:"emails,omitempty"`
	PayoutAccounts []string `json:"payout_accounts,omitempty"`
	// Keys are the approver's own public keys: each signs only this
	// approver's decisions. More than one during a rotation.
	Keys []Key `json:"keys,omitempty"`
	// Locale (a BCP 47 tag like "de-DE") and TimeZone (an IANA name like
	// "Europe/Berlin") are how the inbox shows this approver amounts and
	// deadlines; empty: from the browser, and UTC.
	Locale   string `json:"locale,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// CanonicalEmail is the mailbox an address delivers to, for comparing
// people rather than spellings: case-folded, with the local part's +tag
// dropped (adjuster17+home@Insurer.example is adjuster17@insurer.example).
func CanonicalEmail(addr string) string {
	addr = strings.ToLower(strings.TrimSpace(addr))
	local, domain, ok := strings.Cut(addr, "@")
	if !ok {
		return addr
	}
	if i := strings.IndexByte(local, '+'); i > 0 {
		local = local[:i]
	}
	return local + "@" + domain
}

// Is says whether identity (an approver ID, an e-mail address in any
// spelling, or a payout account) is this approver: their ID, one of their
// addresses, or one of their payout accounts.
func (a Approver) Is(identity string) bool {
	identity = strings.TrimSpace(identity)
	if identity == "" {
		return false
	}
	if strings.EqualFold(identity, a.ID) || slices.Contains(a.PayoutAccounts, identity) {
		return true
	}
	if !strings.Contains(identity, "@") {
		return false
	}
	mine := CanonicalEmail(identity)
	for _, e := range append([]string{a.Email}, a.Emails...) {
		if e != "" && CanonicalEmail(e) == mine {
			return true
		}
	}
	return false
}

// Directory is the approver list, sorted by ID so its JSON is stable.
type Directory []Approver

// Find returns the approver with id.
func (d Directory) Find(id string) (Approver, bool) {
	i := sort.Search(len(d), func(i int) bool { return d[i].ID >= id })
	if i < len(d) && d[i].ID == id {
		return d[i], true
	}
	return Approver{}, false
}

// Book is the whole directory file: the approvers, and the service keys
// allowed to vouch for any of them.
type Book struct {
	Approvers Directory
	Services  []Service
}

type file struct {
	Approvers   []fileApprover `json:"approvers"`
	ServiceKeys []fileService  `json:"service_keys,omitempty"`
}

type fileApprover struct {
	ID             string            `json:"id"`
	Role           Role              `json:"role"`
	Email          string            `json:"email"`
	Emails         []string          `json:"emails,omitempty"`
	PayoutAccounts []string          `json:"payout_accounts,omitempty"`
	Limits         map[string]string `json:"limits"`
	Keys           []json.RawMessage `json:"keys,omitempty"`
	Locale         string            `json:"locale,omitempty"`
	TimeZone       string            `json:"time_zone,omitempty"`
}

type fileService struct {
	Name string          `json:"name"`
	Key  json.RawMessage `json:"key"`
}

// Parse reads a directory file:
//
//	{"approvers":[{"id":"adjuster-17","role":"adjuster","email":"…","limits":{"usd":"5000.00"},
//	               "keys":[{"kty":"OKP","crv":"Ed25519","kid":"adjuster-17-…","x":"…"}]}],
//	 "service_keys":[{"name":"inbox","key":{"kty":"OKP","crv":"Ed25519","kid":"inbox-…","x":"…"}}]}
func Parse(data []byte) (Book, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Book{}, fmt.Errorf("approvers: %w", err)
	}
	d := make(Directory, 0, len(f.Approvers))
	seen := map[string]bool{}
	kids := map[string]string{}
	key := func(where string, raw json.RawMessage) (Key, error) {
		k, err := parseKey(raw)
		if err != nil {
			return Key{}, fmt.Errorf("%s: %w", where, err)
		}
		if other, dup := kids[k.ID]; dup {
			return Key{}, fmt.Errorf("%s: kid %q is also %s", where, k.ID, other)
		}
		kids[k.ID] = where
		return k, nil
	}
	for i, a := range f.Approvers {
		where := fmt.Sprintf("approvers[%d] (%s)", i, a.ID)
		switch {
		case a.ID == "" || len(a.ID) > MaxIDLen:
			return Book{}, fmt.Errorf("%s: id must be 1 to %d characters", where, MaxIDLen)
		case seen[a.ID]:
			return Book{}, fmt.Errorf("%s: listed twice", where)
		case a.Role != Adjuster && a.Role != Supervisor:
			return Book{}, fmt.Errorf("%s: role must be %q or %q", where, Adjuster, Supervisor)
		case len(a.Limits) == 0:
			return Book{}, fmt.Errorf("%s: needs limits, e.g. {\"usd\":\"5000.00\"}", where)
		}
		seen[a.ID] = true
		if _, err := language.Parse(a.Locale); a.Locale != "" && err != nil {
			return Book{}, fmt.Errorf("%s: locale %q: %v", where, a.Locale, err)
		}
		if _, err := time.LoadLocation(a.TimeZone); a.TimeZone != "" && err != nil {
			return Book{}, fmt.Errorf("%s: time_zone %q: %v", where, a.TimeZone, err)
		}
		ap := Approver{ID: a.ID, Role: a.Role, Email: strings.ToLower(a.Email), Limits: map[string]int64{}, Locale: a.Locale, TimeZone: a.TimeZone}
		for j, e := range a.Emails {
			if !strings.Contains(e, "@") || len(e) > MaxIDLen {
				return Book{}, fmt.Errorf("%s.emails[%d]: %q is not an e-mail address of at most %d characters", where, j, e, MaxIDLen)
			}
			ap.Emails = append(ap.Emails, strings.ToLower(e))
		}
		for j, acct := range a.PayoutAccounts {
			if strings.TrimSpace(acct) == "" || len(acct) > MaxIDLen {
				return Book{}, fmt.Errorf("%s.payout_accounts[%d]: must be 1 to %d characters", where, j, MaxIDLen)
			}
			ap.PayoutAccounts = append(ap.PayoutAccounts, acct)
		}
		for cur, v := range a.Limits {
			minor, err := claim.ParseAmount(v, strings.ToLower(cur))
			if err != nil {
				return Book{}, fmt.Errorf("%s: limits.%s: %w", where, cur, err)
			}
			ap.Limits[strings.ToLower(cur)] = minor
		}
		for j, raw := range a.Keys {
			k, err := key(fmt.Sprintf("%s.keys[%d]", where, j), raw)
			if err != nil {
				return Book{}, err
			}
			ap.Keys = append(ap.Keys, k)
		}
		d = append(d, ap)
	}
	sort.Slice(d, func(i, j int) bool { return d[i].ID < d[j].ID })
	b := Book{Approvers: d}
	names := map[string]bool{}
	for i, s := range f.ServiceKeys {
		where := fmt.Sprintf("service_keys[%d] (%s)", i, s.Name)
		if s.Name == "" || len(s.Name) > MaxIDLen || names[s.Name] {
			return Book{}, fmt.Errorf("%s: name must be 1 to %d characters and unique", where, MaxIDLen)
		}
		names[s.Name] = true
		k, err := key(where+".key", s.Key)
		if err != nil {
			return Book{}, err
		}
		b.Services = append(b.Services, Service{Name: s.Name, Key: k})
	}
	return b, nil
}

// MaxIDLen bounds an approver ID or a service name.
const MaxIDLen = 128

//go:embed approvers.json
var sample []byte

// Load reads the directory at path, or the sample (the approvers the demo
// and examples use, with no keys: nobody can sign for them) when path is
// empty.
func Load(path string) (Book, error) {
	data := sample
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Book{}, fmt.Errorf("approvers: %w", err)
		}
	}
	return Parse(data)
}

// RemoveKey revokes a key: it removes the key with id from the directory
// file at path, wherever it is listed. Approvals opened afterwards never
// see it, and a decision it signed but the claim has not yet acted on is
// voided when the claim re-reads the directory before paying.
func RemoveKey(path, id string) error {
	f, err := readFile(path, false)
	if err != nil {
		return err
	}
	kid := func(raw json.RawMessage) string {
		var k struct {
			ID string `json:"kid"`
		}
		_ = json.Unmarshal(raw, &k)
		return k.ID
	}
	found := false
	for i := range f.Approvers {
		f.Approvers[i].Keys = slices.DeleteFunc(f.Approvers[i].Keys, func(raw json.RawMessage) bool {
			match := kid(raw) == id
			found = found || match
			return match
		})
	}
	f.ServiceKeys = slices.DeleteFunc(f.ServiceKeys, func(s fileService) bool {
		match := kid(s.Key) == id
		found = found || match
		return match
	})
	if !found {
		return fmt.Errorf("approvers %s: no key %q", path, id)
	}
	return f.write(path)
}

// readFile reads the directory file at path in its file form, or the
// sample when it does not exist and orSample is set.
func readFile(path string, orSample bool) (file, error) {
	data, err := os.ReadFile(path)
	if orSample && errors.Is(err, os.ErrNotExist) {
		data, err = sample, nil
	}
	if err != nil {
		return file{}, fmt.Errorf("approvers: %w", err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return file{}, fmt.Errorf("approvers %s: %w", path, err)
	}
	return f, nil
}

// write checks the directory and replaces the file at path atomically, so
// a worker reading it never sees half a file. It holds no secrets:
// owner-writable, world-readable.
func (f file) write(path string) error {
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if _, err := Parse(out); err != nil {
		return err
	}
	return writeFile(path, append(out, '\n'))
}

func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".approvers-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// AddKey adds a key file's public key to the directory file at path, to
// the approver or the service the key belongs to (a new service entry if
// the name is new). A missing file starts from the sample directory. The
// file is rewritten owner-writable, world-readable: it holds no secrets.
func AddKey(path string, kf KeyFile) error {
	f, err := readFile(path, true)
	if err != nil {
		return err
	}
	pub, err := json.Marshal(kf.Public().JWK())
	if err != nil {
		return err
	}
	switch {
	case kf.Approver != "":
		i := slices.IndexFunc(f.Approvers, func(a fileApprover) bool { return a.ID == kf.Approver })
		if i < 0 {
			return fmt.Errorf("approvers %s: no approver %q to add a key to", path, kf.Approver)
		}
		f.Approvers[i].Keys = append(f.Approvers[i].Keys, pub)
	default:
		i := slices.IndexFunc(f.ServiceKeys, func(s fileService) bool { return s.Name == kf.Service })
		if i >= 0 {
			return fmt.Errorf("approvers %s: service %q has a key; remove it first to replace it", path, kf.Service)
		}
		f.ServiceKeys = append(f.ServiceKeys, fileService{Name: kf.Service, Key: pub})
	}
	return f.write(path)
}
