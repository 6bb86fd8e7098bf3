// Package stripesim is a local, Stripe-compatible HTTP server for the
// transfers API. The official client github.com/stripe/stripe-go/v76 talks to
// it unmodified once its API backend URL points at the simulator, so payment
// code can be run and tested without a Stripe account.
//
// It is a test double with real persistence (SQLite via the pure-Go
// modernc.org/sqlite driver) and Stripe's semantics:
//
//   - POST /v1/transfers, GET /v1/transfers/{id}, GET /v1/transfers (with
//     transfer_group, destination, created[gt|gte|lt|lte] and cursor
//     pagination, newest first).
//   - Stripe error objects, Request-Id on every response, Bearer or Basic auth.
//   - Idempotency-Key handling as documented by Stripe: the first request with
//     a key saves its response, identical retries replay it with
//     "Idempotent-Replayed: true", a retry with different parameters gets 400
//     idempotency_error, and a retry while the first is still executing gets
//     409 idempotency_key_in_use. Requests that fail validation save nothing,
//     so a corrected retry with the same key works. Keys are forgotten after
//     Config.KeyTTL (24h by default, as on Stripe); reusing a key after that
//     creates a new transfer, which is why callers should also check-then-act
//     (for example list by transfer_group) before creating.
//
// # Idempotency key life cycle
//
// A key row is in one of three states:
//
//   - in_flight: a request reserved the key and is executing. The reservation
//     and the decision to reserve happen in one IMMEDIATE SQLite transaction,
//     so exactly one of several concurrent requests wins.
//   - done: the transfer and the saved response were committed together in
//     one transaction, so a crash can never leave a transfer that a retry
//     would not replay.
//   - released: execution failed before commit (for example a BeforeCommit
//     hook error, answered with 500). No result is saved; the key may be
//     reused with any parameters. Per-key counters are kept.
//
// Abandoned reservations: if the process dies while a request is in flight,
// its row would otherwise stay in_flight and answer 409 forever. A row that
// has been in flight for longer than Config.InFlightTimeout (60s by default,
// measured with Config.Now) is therefore treated as abandoned and the next
// request with that key takes it over. Should the original request still be
// alive and try to commit afterwards, its commit is refused (the key now has
// another owner) and it answers 409 instead of creating a duplicate.
//
// # Scope
//
// All configured API keys act on one simulated account, which owns a single
// idempotency key space. Transfers cannot be updated or reversed; the only
// funding source is the account balance (source_transaction is rejected as a
// missing charge), and balances are unlimited.
//
// The /_sim endpoints are unauthenticated operational helpers:
// GET /_sim/health answers "ok" and GET /_sim/idempotency lists KeyStats.
package stripesim
