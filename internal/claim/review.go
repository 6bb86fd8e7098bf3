package claim

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Review makes a claim a person's review of another claim's automated
// outcome, asked for by its claimant: the claim `<id>-review`, for the
// amount still in dispute. What the original claimed and paid are kept, so
// coverage counts the deductible and the limit once across both.
type Review struct {
	// Of is the original claim.
	Of           string `json:"claim_id"`
	ClaimedMinor int64  `json:"claimed_minor"`
	PaidMinor    int64  `json:"paid_minor"`
	// By asked for the review, at At, because of Reason (the claimant's
	// own words, shown to the person who decides).
	By     string    `json:"requested_by"`
	At     time.Time `json:"requested_at"`
	Reason string    `json:"reason"`
}

// ReviewSuffix names a review claim after the claim it reviews.
const ReviewSuffix = "-review"

// ReviewID is the ID of the review of claim id.
func ReviewID(id string) string { return id + ReviewSuffix }

// DocumentsOf is the claim whose folder of the blob store holds c's
// documents: c's own, or for a review claim the claim it reviews (a review
// carries its original's evidence; Validate holds its ID to the original's).
func (c Claim) DocumentsOf() string {
	if c.ReviewOf != nil {
		return c.ReviewOf.Of
	}
	return c.ID
}

// MaxReviewReasonLen bounds a review's reason, like a decision's.
const MaxReviewReasonLen = 1000

// CheckReviewText says what is wrong with who asks for a review, or its
// reason: each is required, bounded, and plain text on one line's terms
// (no control characters).
func CheckReviewText(field, v string, max int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%s is required", field)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", field)
	case utf8.RuneCountInString(v) > max:
		return fmt.Errorf("%s is longer than %d characters", field, max)
	case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }):
		return fmt.Errorf("%s holds a control character", field)
	}
	return nil
}

// validReview checks a review claim's link to its original.
func (c Claim) validReview() error {
	rv := c.ReviewOf
	var errs ValidationError
	bad := func(field, reason string, args ...any) {
		errs = append(errs, FieldError{Field: "review_of." + field, Reason: fmt.Sprintf(reason, args...)})
	}
	if rv.Of == "" || c.ID != ReviewID(rv.Of) {
		bad("claim_id", "a review claim is named after its original: %q is not %q", c.ID, ReviewID(rv.Of))
	}
	if rv.PaidMinor < 0 || rv.ClaimedMinor <= rv.PaidMinor || c.AmountMinor != rv.ClaimedMinor-rv.PaidMinor {
		bad("paid_minor", "the review is of the amount still in dispute: %d claimed, %d paid, not %d", rv.ClaimedMinor, rv.PaidMinor, c.AmountMinor)
	}
	if err := CheckReviewText("requested_by", rv.By, MaxNameLen); err != nil {
		bad("requested_by", "%v", err)
	}
	if err := CheckReviewText("reason", rv.Reason, MaxReviewReasonLen); err != nil {
		bad("reason", "%v", err)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
