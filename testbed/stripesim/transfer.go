package stripesim

import "time"

// transfer is a Stripe transfer object; field order follows Stripe's JSON.
type transfer struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountReversed     int64             `json:"amount_reversed"`
	BalanceTransaction string            `json:"balance_transaction"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Description        *string           `json:"description"`
	Destination        string            `json:"destination"`
	DestinationPayment string            `json:"destination_payment"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	Reversals          reversalList      `json:"reversals"`
	Reversed           bool              `json:"reversed"`
	SourceTransaction  *string           `json:"source_transaction"`
	SourceType         string            `json:"source_type"`
	TransferGroup      *string           `json:"transfer_group"`
}

// reversalList is the embedded, always-empty list of reversals: the simulator
// does not support reversing transfers.
type reversalList struct {
	Object     string `json:"object"`
	Data       []any  `json:"data"`
	HasMore    bool   `json:"has_more"`
	TotalCount int    `json:"total_count"`
	URL        string `json:"url"`
}

func newTransfer(in transferInput, now time.Time) *transfer {
	t := &transfer{
		ID:                 newTransferID(),
		Amount:             in.Amount,
		BalanceTransaction: newBalanceTransactionID(),
		Created:            now.Unix(),
		Currency:           in.Currency,
		Description:        in.Description,
		Destination:        in.Destination,
		DestinationPayment: newPaymentID(),
		Metadata:           in.Metadata,
		SourceType:         in.SourceType,
		TransferGroup:      in.TransferGroup,
	}
	t.finish()
	return t
}

// finish fills the derived fields that are not stored.
func (t *transfer) finish() {
	t.Object = "transfer"
	if t.Metadata == nil {
		t.Metadata = map[string]string{}
	}
	t.Reversals = reversalList{
		Object: "list",
		Data:   []any{},
		URL:    "/v1/transfers/" + t.ID + "/reversals",
	}
}

// transferList is the body of GET /v1/transfers.
type transferList struct {
	Object  string      `json:"object"`
	Data    []*transfer `json:"data"`
	HasMore bool        `json:"has_more"`
	URL     string      `json:"url"`
}
