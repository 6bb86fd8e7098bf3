package e2e

import "github.com/stripe/stripe-go/v76"

func transferGroup(id string) *stripe.TransferListParams {
	return &stripe.TransferListParams{TransferGroup: stripe.String(id)}
}
