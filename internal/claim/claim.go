// Package claim is the claim as the rest of the system sees it: its JSON file
// form, validation with field-level errors, money in minor units, the nine
// steps, and the idempotency keys derived from them.
package claim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Claim is the validated, internal form. Amount is in minor units of Currency.
type Claim struct {
	ID          string     `json:"claim_id"`
	PolicyID    string     `json:"policy_id"`
	Claimant    Claimant   `json:"claimant"`
	AmountMinor int64      `json:"amount_minor"`
	Currency    string     `json:"currency"`
	Description string     `json:"description,omitempty"`
	Documents   []Document `json:"documents,omitempty"`
	// ReviewOf, when set, makes this claim a person's review of another
	// claim's automated outcome (review.go): set only by the claims store.
	ReviewOf *Review `json:"review_of,omitempty"`
}

// Claimant is the person paid.
type Claimant struct {
	Name          string `json:"name"`
	Email         string `json:"email"`
	StripeAccount string `json:"stripe_account"`
}

// Document is evidence kept outside the workflow history. A claim file
// names a local Path; intake stores the file in the blob store and the claim
// carries the reference (URI, SHA-256, size) from then on.
type Document struct {
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	URI    string `json:"uri,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// Amount renders the claimed amount as a decimal string.
func (c Claim) Amount() string { return FormatAmount(c.AmountMinor, c.Currency) }

// File is the claim file format: amounts as decimal strings.
type File struct {
	ClaimID     string     `json:"claim_id"`
	PolicyID    string     `json:"policy_id"`
	Claimant    Claimant   `json:"claimant"`
	Amount      string     `json:"amount"`
	Currency    string     `json:"currency"`
	Description string     `json:"description,omitempty"`
	Documents   []Document `json:"documents,omitempty"`
}

// ToFile renders a claim back into its file form.
func (c Claim) ToFile() File {
	return File{ClaimID: c.ID, PolicyID: c.PolicyID, Claimant: c.Claimant, Amount: c.Amount(),
		Currency: c.Currency, Description: c.Description, Documents: c.Documents}
}

// Limits on what a claim may carry. Documents are references, so the limits
// keep workflow inputs small, not evidence.
const (
	MaxIDLen          = 64
	MaxNameLen        = 200
	MaxDescriptionLen = 10_000
	MaxDocuments      = 20
	MaxPathLen        = 1024
	MaxFileBytes      = 256 << 10
)

var (
	idPattern      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	accountPattern = regexp.MustCompile(`^acct_[A-Za-z0-9]{1,250}$`)
	shaPattern     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// FieldError says which field of a claim is wrong and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Reason }

// ValidationError lists every problem found in a claim, in field order.
type ValidationError []FieldError

func (v ValidationError) Error() string {
	parts := make([]string, len(v))
	for i, e := range v {
		parts[i] = e.Error()
	}
	return "invalid claim: " + strings.Join(parts, "; ")
}

// Parse decodes and validates a claim file. Unknown fields are refused so a
// misspelt field never silently drops data.
func Parse(data []byte) (Claim, error) {
	if len(data) > MaxFileBytes {
		return Claim{}, ValidationError{{Field: "(file)", Reason: fmt.Sprintf("is %d bytes, more than %d", len(data), MaxFileBytes)}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return Claim{}, ValidationError{decodeError(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Claim{}, ValidationError{{Field: "(file)", Reason: "has data after the claim object"}}
	}
	return f.Claim()
}

func decodeError(err error) FieldError {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(file)"
		}
		return FieldError{Field: field, Reason: fmt.Sprintf("must be a JSON %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return FieldError{Field: "(file)", Reason: fmt.Sprintf("is not valid JSON at byte %d: %v", syntaxErr.Offset, err)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		if field == "" {
			field = `""` // a key that is the empty string
		}
		return FieldError{Field: field, Reason: "is not a claim field"}
	case errors.Is(err, io.EOF):
		return FieldError{Field: "(file)", Reason: "is empty"}
	default:
		return FieldError{Field: "(file)", Reason: err.Error()}
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	default:
		return goKind
	}
}

// Claim validates the file form and converts it.
func (f File) Claim() (Claim, error) {
	var errs ValidationError
	bad := func(field, reason string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(reason, args...)})
	}
	checkID := func(field, v string) {
		switch {
		case v == "":
			bad(field, "is required")
		case len(v) > MaxIDLen:
			bad(field, "is %d characters, more than %d", len(v), MaxIDLen)
		case !idPattern.MatchString(v):
			bad(field, "must be ASCII letters, digits, '.', '_' or '-', starting with a letter or digit")
		}
	}
	checkText := func(field, v string, max int, required bool) {
		switch {
		case required && strings.TrimSpace(v) == "":
			bad(field, "is required")
		case !utf8.ValidString(v):
			bad(field, "is not valid UTF-8")
		case utf8.RuneCountInString(v) > max:
			bad(field, "is longer than %d characters", max)
		}
	}

	checkID("claim_id", f.ClaimID)
	if strings.HasPrefix(f.ClaimID, ReservedIDPrefix) {
		// The Temporal server's authorizer lets a what-if's identity answer
		// the tasks of runs named so (temporalserver/authz).
		bad("claim_id", "may not begin %q: what-if runs are named so", ReservedIDPrefix)
	}
	checkID("policy_id", f.PolicyID)
	checkText("claimant.name", f.Claimant.Name, MaxNameLen, true)
	if f.Claimant.Email == "" {
		bad("claimant.email", "is required")
	} else if a, err := mail.ParseAddress(f.Claimant.Email); err != nil || a.Address != f.Claimant.Email {
		bad("claimant.email", "%q is not a plain e-mail address", f.Claimant.Email)
	}
	if f.Claimant.StripeAccount == "" {
		bad("claimant.stripe_account", "is required")
	} else if !accountPattern.MatchString(f.Claimant.StripeAccount) {
		bad("claimant.stripe_account", "must be a Stripe connected account ID like acct_1A2b3C")
	}

	currency := strings.ToLower(f.Currency)
	var amount int64
	if currency == "" {
		bad("currency", "is required")
	} else if _, ok := exponents[currency]; !ok {
		bad("currency", "%q is not a supported currency", f.Currency)
	} else {
		var err error
		if amount, err = ParseAmount(f.Amount, currency); err != nil {
			bad("amount", "%v", err)
		}
	}
	checkText("description", f.Description, MaxDescriptionLen, false)
	if len(f.Documents) > MaxDocuments {
		bad("documents", "has %d entries, more than %d", len(f.Documents), MaxDocuments)
	}
	for i, d := range f.Documents {
		checkText(fmt.Sprintf("documents[%d].name", i), d.Name, MaxNameLen, true)
		switch {
		case d.Path == "" && d.URI == "":
			bad(fmt.Sprintf("documents[%d].path", i), "is required")
		case d.URI != "" && (!shaPattern.MatchString(d.SHA256) || d.Size < 0):
			bad(fmt.Sprintf("documents[%d].uri", i), "needs its sha256 (64 hex digits) and size")
		default:
			checkText(fmt.Sprintf("documents[%d].path", i), d.Path, MaxPathLen, false)
			checkText(fmt.Sprintf("documents[%d].uri", i), d.URI, MaxPathLen, false)
		}
	}
	if len(errs) > 0 {
		return Claim{}, errs
	}
	return Claim{ID: f.ClaimID, PolicyID: f.PolicyID, Claimant: f.Claimant, AmountMinor: amount,
		Currency: currency, Description: f.Description, Documents: f.Documents}, nil
}

// Validate re-checks a claim that arrived in internal form (a workflow input
// started by hand, say) by the same rules as a file.
// ReservedIDPrefix begins what-if runs' IDs, never a claim's.
const ReservedIDPrefix = "whatif-"

func (c Claim) Validate() error {
	if _, ok := exponents[c.Currency]; ok && c.AmountMinor <= 0 {
		return ValidationError{{Field: "amount", Reason: "must be greater than zero"}}
	}
	if _, err := c.ToFile().Claim(); err != nil {
		return err
	}
	if c.ReviewOf != nil {
		return c.validReview()
	}
	return nil
}
