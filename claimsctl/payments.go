package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// payments prints, per claim, what the payment provider holds for it:
// "claim-0042: 1 transfer, total 1840.00 usd", or "claim-0044: 0 transfers
// (expired)" with the claim's status when nothing was paid.
func payments(ctx context.Context, ids []string, out io.Writer) error {
	sc := activities.NewStripeClient(activities.StripeConfig{SecretKey: config.Get("STRIPE_SECRET_KEY", ""), APIBase: config.Get("STRIPE_API_BASE", "")})
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, id := range ids {
		params := &stripe.TransferListParams{TransferGroup: stripe.String(id)}
		params.Context = ctx
		it := sc.Transfers.List(params)
		n := 0
		totals := map[string]int64{}
		var currencies []string
		for it.Next() {
			tr := it.Transfer()
			n++
			cur := string(tr.Currency)
			if _, ok := totals[cur]; !ok {
				currencies = append(currencies, cur)
			}
			totals[cur] += tr.Amount
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("transfers of %s: %w", id, err)
		}
		switch n {
		case 0:
			status := "no claim status"
			if desc, err := c.DescribeWorkflow(ctx, id, ""); err == nil {
				var s string
				if p := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.ClaimStatusKey.GetName()]; p != nil {
					if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err == nil {
						status = s
					}
				}
			}
			fmt.Fprintf(out, "%s: 0 transfers (%s)\n", id, status)
		default:
			parts := make([]string, len(currencies))
			for i, cur := range currencies {
				parts[i] = claim.FormatAmount(totals[cur], cur) + " " + cur
			}
			plural := "s"
			if n == 1 {
				plural = ""
			}
			fmt.Fprintf(out, "%s: %d transfer%s, total %s\n", id, n, plural, strings.Join(parts, " + "))
		}
	}
	return nil
}
