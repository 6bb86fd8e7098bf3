package stripesim

import (
	"crypto/rand"
	"math/big"
)

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random alphanumerics, the shape of Stripe
// object IDs. crypto/rand keeps IDs unguessable and collision-free in practice
// across restarts, which a seeded math/rand would not.
func newID(prefix string, n int) string {
	b := make([]byte, len(prefix)+n)
	copy(b, prefix)
	limit := big.NewInt(int64(len(idAlphabet)))
	for i := len(prefix); i < len(b); i++ {
		v, err := rand.Int(rand.Reader, limit)
		if err != nil {
			// crypto/rand never fails on supported platforms (Go 1.24+ crashes
			// the program instead of returning an error).
			panic(err)
		}
		b[i] = idAlphabet[v.Int64()]
	}
	return string(b)
}

func newTransferID() string           { return newID("tr_", 24) }
func newBalanceTransactionID() string { return newID("txn_", 24) }
func newPaymentID() string            { return newID("py_", 24) }
func newRequestID() string            { return newID("req_", 14) }
func newReservationToken() string     { return newID("rsv_", 24) }
