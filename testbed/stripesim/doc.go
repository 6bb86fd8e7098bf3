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
//   - Bounded request bodies: 1 MiB for the API, 64 KiB for a fault rule. A
//     larger body is refused whole with 413 invalid_request_error, never
//     truncated, and before any fault rule sees it.
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
// # Fault injection
//
// To prove that callers survive receiver faults, FaultRule values (added with
// Server.AddFault, Config.Faults, the command's STRIPESIM_FAULTS / -faults,
// or POST /_sim/faults) make matching requests fail. A rule matches on method
// (default POST), exact path (default /v1/transfers), and optionally the
// request's transfer_group and an Idempotency-Key prefix. Every way of
// adding rules validates them first (FaultRule.Validate: a known fault, a
// method name, a path under /v1/, a delay for slow and only for slow) and
// adds none if one is invalid: AddFault panics, Open and the command fail
// before touching the database, and POST /_sim/faults answers 400. Rules are
// checked in insertion order, the first live match fires and counts, and a
// rule retires after Times firings (0 = once, -1 = never). Faults live in
// memory only, apply after authentication and only to /v1 requests, and each
// firing is logged at warn level. The faults are:
//
//   - 500-after-commit: the request runs normally (for a create the transfer
//     and its saved idempotent response commit in one transaction), then the
//     client gets 500 api_error instead. A retry with the same key replays
//     (Idempotent-Replayed: true) and a list by transfer_group shows it.
//   - drop-after-commit: likewise, but the connection is closed with no
//     response at all. Beware that Go's HTTP transport may resend a request
//     that carries an Idempotency-Key on its own when a reused keep-alive
//     connection dies, so the caller may just see the replay. Both after-commit
//     faults discard whatever the request produced (a replay or a validation
//     error too).
//   - slow: sleeps Delay, then handles the request normally. The sleep comes
//     first, before the idempotency key is reserved, and the request is then
//     detached from the client's cancellation: a caller that times out sees a
//     timeout while its request still lands afterwards, as on a real
//     provider. A retry sent during the sleep executes first, and the late
//     original then replays it. Shutting down cuts the sleep short:
//     Server.BeginShutdown, which Close calls and the command registers with
//     http.Server.RegisterOnShutdown, wakes every sleeping request and
//     answers it 503 api_error without processing it (as it does any slow
//     fault firing afterwards), so neither Shutdown nor Close waits out a
//     long delay.
//   - stale-list (GET /v1/transfers only): a list answered with no
//     transfers, as one that has not caught up with a create yet; a
//     caller's check-then-act then creates again, and the key's replay
//     keeps it to one transfer.
//   - 429 (rate_limit), 409 (idempotency_key_in_use, byte for byte what a
//     real in-flight conflict returns) and 500-before-commit (api_error):
//     answered without executing; nothing is stored against the key, so a
//     retry executes normally.
//
// In JSON a rule's delay is a Go duration string ("250ms", "3s"); unknown
// fields are rejected. GET /_sim/faults lists the rules (with id, fired and
// retired), POST /_sim/faults adds one and answers {"id":N}, and DELETE
// /_sim/faults clears them all and answers {"cleared":N}.
//
// # Scope
//
// All configured API keys act on one simulated account, which owns a single
// idempotency key space. Transfers cannot be updated or reversed; the only
// funding source is the account balance (source_transaction is rejected as a
// missing charge), and balances are unlimited.
//
// The /_sim endpoints are unauthenticated operational helpers:
// GET /_sim/health answers "ok", GET /_sim/idempotency lists KeyStats and
// /_sim/faults manages fault injection (above).
package stripesim
