package stripesim

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stripe's documented metadata limits.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
	maxBodyBytes        = 1 << 20
)

var destinationRE = regexp.MustCompile(`^acct_[A-Za-z0-9]+$`)

var sourceTypes = []string{"bank_account", "card", "fpx"}

// transferInput is a validated POST /v1/transfers request.
type transferInput struct {
	Amount        int64
	Currency      string
	Destination   string
	Description   *string
	TransferGroup *string
	SourceType    string
	Metadata      map[string]string
}

// readForm parses a POST body the way Stripe does: form-encoded only. Query
// string parameters are merged in because Stripe accepts them on POST too.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return nil, invalidRequest(http.StatusBadRequest, "", "",
				"Invalid request: unsupported Content-Type %s. Use application/x-www-form-urlencoded.", ct)
		}
	}
	body, aerr := readBody(w, r, maxBodyBytes, "Invalid request")
	if aerr != nil {
		return nil, aerr
	}
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, invalidRequest(http.StatusBadRequest, "", "", "Invalid request: malformed form body: %v", err)
	}
	for k, vs := range r.URL.Query() {
		values[k] = append(values[k], vs...)
	}
	return values, nil
}

// readBody reads the whole body if it is at most limit bytes; a larger one
// is refused with 413 rather than truncated. what prefixes other read errors
// (400).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, what string) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return nil, errBodyTooLarge(tooLarge.Limit)
	}
	if err != nil {
		return nil, invalidRequest(http.StatusBadRequest, "", "", "%s: could not read body: %v", what, err)
	}
	return body, nil
}

// isExpand reports whether k is one of the encodings of the expand array
// (stripe-go sends expand[0]=..., other clients expand[]=...). Expansion is
// accepted and ignored: the simulator has no sub-objects to expand.
func isExpand(k string) bool {
	if k == "expand" || k == "expand[]" {
		return true
	}
	inner, ok := bracketed(k, "expand")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(inner)
	return err == nil
}

// bracketed returns x for a key of the form prefix[x] where x contains no
// brackets (i.e. exactly one level of nesting).
func bracketed(k, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(k, prefix+"[")
	if !ok {
		return "", false
	}
	inner, ok := strings.CutSuffix(rest, "]")
	if !ok || strings.ContainsAny(inner, "[]") {
		return "", false
	}
	return inner, true
}

// last returns the final value of a repeated parameter; Stripe's form parser
// lets the last occurrence win.
func last(v url.Values, k string) (string, bool) {
	vs, ok := v[k]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// sortedKeys makes validation deterministic: with several bad parameters the
// same one is always reported.
func sortedKeys(v url.Values) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var transferScalarParams = map[string]bool{
	"amount": true, "currency": true, "destination": true, "description": true,
	"transfer_group": true, "source_type": true, "source_transaction": true,
}

// parseTransferInput validates a create-transfer request in Stripe's order:
// unknown parameters, then missing required ones, then individual values.
func parseTransferInput(v url.Values) (transferInput, *apiError) {
	in := transferInput{SourceType: "card", Metadata: map[string]string{}}
	for _, k := range sortedKeys(v) {
		if err := checkTransferKey(k, v); err != nil {
			return in, err
		}
	}
	for _, p := range []string{"amount", "currency", "destination"} {
		if _, ok := v[p]; !ok {
			return in, errParamMissing(p)
		}
	}
	steps := []func(url.Values, *transferInput) *apiError{
		parseAmount, parseCurrency, parseDestination, parseOptionalStrings, parseSource, parseMetadata,
	}
	for _, step := range steps {
		if err := step(v, &in); err != nil {
			return in, err
		}
	}
	return in, nil
}

func checkTransferKey(k string, v url.Values) *apiError {
	switch {
	case transferScalarParams[k], isExpand(k):
		return nil
	case k == "metadata":
		// A bare, empty "metadata" means "no metadata" (Stripe's unset-all).
		if val, _ := last(v, k); val != "" {
			return invalidRequest(http.StatusBadRequest, "", "metadata", "Invalid object")
		}
		return nil
	case strings.HasPrefix(k, "metadata["):
		if _, ok := bracketed(k, "metadata"); !ok {
			return invalidRequest(http.StatusBadRequest, "", "metadata",
				"Invalid metadata key %q: metadata values must be strings, nested objects are not allowed", k)
		}
		return nil
	default:
		return errParamUnknown(k)
	}
}

func requiredString(v url.Values, p string) (string, *apiError) {
	s, _ := last(v, p)
	if s == "" {
		return "", errParamEmpty(p)
	}
	return s, nil
}

func parseAmount(v url.Values, in *transferInput) *apiError {
	s, err := requiredString(v, "amount")
	if err != nil {
		return err
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return errInvalidInteger("amount", s)
	}
	if n < 1 {
		return invalidRequest(http.StatusBadRequest, "parameter_invalid_integer", "amount",
			"This value must be greater than or equal to 1.")
	}
	in.Amount = n
	return nil
}

func parseCurrency(v url.Values, in *transferInput) *apiError {
	s, err := requiredString(v, "currency")
	if err != nil {
		return err
	}
	c, ok := normalizeCurrency(s)
	if !ok {
		return invalidRequest(http.StatusBadRequest, "", "currency",
			"Invalid currency: %s. Stripe currently supports these currencies: %s", s, strings.Join(currencies, ", "))
	}
	in.Currency = c
	return nil
}

func parseDestination(v url.Values, in *transferInput) *apiError {
	s, err := requiredString(v, "destination")
	if err != nil {
		return err
	}
	if !destinationRE.MatchString(s) {
		return invalidRequest(http.StatusBadRequest, "resource_missing", "destination", "No such destination: '%s'", s)
	}
	in.Destination = s
	return nil
}

// parseOptionalStrings handles nullable strings: Stripe treats an empty value
// as "not set", so the object shows null.
func parseOptionalStrings(v url.Values, in *transferInput) *apiError {
	if s, _ := last(v, "description"); s != "" {
		in.Description = &s
	}
	if s, _ := last(v, "transfer_group"); s != "" {
		in.TransferGroup = &s
	}
	return nil
}

// parseSource validates source_type and rejects source_transaction: funding
// from a specific charge needs a charge, and the simulator has none, so any ID
// is "missing" exactly as an unknown charge would be on Stripe.
func parseSource(v url.Values, in *transferInput) *apiError {
	if s, _ := last(v, "source_transaction"); s != "" {
		return invalidRequest(http.StatusBadRequest, "resource_missing", "source_transaction", "No such charge: '%s'", s)
	}
	if s, ok := last(v, "source_type"); ok {
		if !slices.Contains(sourceTypes, s) {
			return invalidRequest(http.StatusBadRequest, "", "source_type",
				"Invalid source_type: must be one of %s", strings.Join(sourceTypes, ", "))
		}
		in.SourceType = s
	}
	return nil
}

func parseMetadata(v url.Values, in *transferInput) *apiError {
	for _, k := range sortedKeys(v) {
		name, ok := bracketed(k, "metadata")
		if !ok {
			continue
		}
		if err := checkMetadataEntry(name, v); err != nil {
			return err
		}
		// Empty values unset a key; on create that simply means "absent".
		if val, _ := last(v, k); val != "" {
			in.Metadata[name] = val
		}
	}
	if len(in.Metadata) > maxMetadataKeys {
		return invalidRequest(http.StatusBadRequest, "", "metadata",
			"Invalid metadata: metadata may have up to %d keys, but you passed %d.", maxMetadataKeys, len(in.Metadata))
	}
	return nil
}

func checkMetadataEntry(name string, v url.Values) *apiError {
	param := "metadata[" + name + "]"
	if name == "" {
		return invalidRequest(http.StatusBadRequest, "", "metadata", "Invalid metadata: keys must not be empty.")
	}
	if utf8.RuneCountInString(name) > maxMetadataKeyLen {
		return invalidRequest(http.StatusBadRequest, "", param,
			"Invalid metadata: keys can be at most %d characters long, but %q is longer.", maxMetadataKeyLen, name)
	}
	if val, _ := last(v, param); utf8.RuneCountInString(val) > maxMetadataValueLen {
		return invalidRequest(http.StatusBadRequest, "", param,
			"Invalid metadata: values can be at most %d characters long.", maxMetadataValueLen)
	}
	return nil
}
