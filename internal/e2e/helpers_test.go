package e2e

import (
	"time"

	"github.com/stripe/stripe-go/v76"
)

func transferGroup(id string) *stripe.TransferListParams {
	return &stripe.TransferListParams{TransferGroup: stripe.String(id)}
}

const (
	testTimeout = time.Minute
	pollEvery   = 100 * time.Millisecond
)
