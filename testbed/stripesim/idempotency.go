package stripesim

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"time"
)

const (
	statusInFlight = "in_flight"
	statusDone     = "done"
	statusReleased = "released"
)

// maxIdempotencyKeyLen is Stripe's limit (stripe-go enforces it client-side too).
const maxIdempotencyKeyLen = 255

// fingerprint identifies "the same request" for idempotency: method, path and
// the parameters in canonical form. url.Values.Encode sorts keys, so clients
// that order fields differently still match; values keep their order because
// for arrays the order is meaningful.
func fingerprint(method, path string, params url.Values) string {
	sum := sha256.Sum256([]byte(method + " " + path + "\n" + params.Encode()))
	return hex.EncodeToString(sum[:])
}

// outcome is what the idempotency layer decided for an incoming request.
type outcome int

const (
	// outcomeFree: the key holds no result and the request failed validation,
	// so nothing was reserved (Stripe saves no result for invalid requests).
	outcomeFree outcome = iota
	// outcomeReserved: this request now owns the key and must commit or release.
	outcomeReserved
	// outcomeReplay: a saved response exists for identical parameters.
	outcomeReplay
	// outcomeMismatch: the key was used with different parameters.
	outcomeMismatch
	// outcomeInUse: another request holding the key is still executing.
	outcomeInUse
)

// reservation describes an incoming request that carries an idempotency key.
type reservation struct {
	Key, Method, Path, Fingerprint string
	// Invalid is true when the parameters failed validation: such a request
	// may replay or conflict with a saved key but never reserves one.
	Invalid bool
	Now     time.Time
	// ExpiresBefore: keys first seen at or before this instant are forgotten.
	ExpiresBefore time.Time
	// AbandonedBefore: in-flight reservations made at or before this instant
	// belong to a request that died (crash, kill -9) and are taken over.
	AbandonedBefore time.Time
}

// reserveResult carries the decision plus, depending on it, the new owner
// token or the saved response.
type reserveResult struct {
	Outcome           outcome
	Token             string
	Status            int
	Body              []byte
	OriginalRequestID string
}

type keyRow struct {
	fingerprint string
	status      string
	reservedNS  int64
	respStatus  sql.NullInt64
	respBody    []byte
	requestID   sql.NullString
}

// reserve runs the whole check-and-reserve decision in one IMMEDIATE
// transaction, so two concurrent requests with the same key can never both
// reserve it, even from two processes sharing the database file.
func (st *store) reserve(ctx context.Context, rq reservation) (reserveResult, error) {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return reserveResult{}, err
	}
	defer tx.Rollback()

	// Forget expired keys (all of them: it is one indexed delete and keeps
	// the table bounded by the TTL window).
	if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE first_seen_ns <= ?`,
		rq.ExpiresBefore.UnixNano()); err != nil {
		return reserveResult{}, err
	}
	row, found, err := loadKey(ctx, tx, rq.Key)
	if err != nil {
		return reserveResult{}, err
	}
	res, err := decide(ctx, tx, rq, row, found)
	if err != nil {
		return reserveResult{}, err
	}
	return res, tx.Commit()
}

func loadKey(ctx context.Context, tx *sql.Tx, key string) (keyRow, bool, error) {
	var r keyRow
	err := tx.QueryRowContext(ctx, `SELECT fingerprint, status, reserved_ns, response_status, response_body, request_id
		FROM idempotency_keys WHERE key = ?`, key).
		Scan(&r.fingerprint, &r.status, &r.reservedNS, &r.respStatus, &r.respBody, &r.requestID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

func decide(ctx context.Context, tx *sql.Tx, rq reservation, row keyRow, found bool) (reserveResult, error) {
	live := found && (row.status == statusDone ||
		(row.status == statusInFlight && row.reservedNS > rq.AbandonedBefore.UnixNano()))
	switch {
	case live && row.fingerprint != rq.Fingerprint:
		// Checked before "in use": a mismatch is permanent, and answering 409
		// would invite a pointless retry of a request that can never succeed.
		return reserveResult{Outcome: outcomeMismatch}, bumpCounter(ctx, tx, rq.Key, "conflicts")
	case live && row.status == statusDone:
		res := reserveResult{
			Outcome:           outcomeReplay,
			Status:            int(row.respStatus.Int64),
			Body:              row.respBody,
			OriginalRequestID: row.requestID.String,
		}
		return res, bumpCounter(ctx, tx, rq.Key, "replays")
	case live:
		return reserveResult{Outcome: outcomeInUse}, bumpCounter(ctx, tx, rq.Key, "in_use")
	case rq.Invalid:
		return reserveResult{Outcome: outcomeFree}, nil
	default:
		token := newReservationToken()
		return reserveResult{Outcome: outcomeReserved, Token: token}, claimKey(ctx, tx, rq, token, found)
	}
}

// bumpCounter counts one more request against key, plus the named counter.
// The column name is always a constant from this file, never user input.
func bumpCounter(ctx context.Context, tx *sql.Tx, key, column string) error {
	_, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET requests = requests + 1, `+
		column+` = `+column+` + 1 WHERE key = ?`, key)
	return err
}

// claimKey creates the key, or takes over a released/abandoned one while
// keeping its counters and first-seen time.
func claimKey(ctx context.Context, tx *sql.Tx, rq reservation, token string, exists bool) error {
	now := rq.Now.UnixNano()
	if !exists {
		_, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys
			(key, method, path, fingerprint, status, owner, reserved_ns, first_seen_ns, requests)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)`,
			rq.Key, rq.Method, rq.Path, rq.Fingerprint, statusInFlight, token, now, now)
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET
		method = ?, path = ?, fingerprint = ?, status = ?, owner = ?, reserved_ns = ?,
		response_status = NULL, response_body = NULL, request_id = NULL, transfer_id = NULL,
		requests = requests + 1
		WHERE key = ?`,
		rq.Method, rq.Path, rq.Fingerprint, statusInFlight, token, now, rq.Key)
	return err
}

// claim identifies a reserved key and the response to save against it.
type claim struct {
	Key, Token string
	Status     int
	Body       []byte
	RequestID  string
}

// errClaimLost means our in-flight reservation was taken over (we ran past the
// abandonment timeout, or past the TTL) so we must not commit.
var errClaimLost = errors.New("idempotency key reservation was lost")

// commitTransfer stores the transfer and, if c is non-nil, the key's saved
// response in one transaction: a crash can never leave a transfer without the
// key record that would replay it (which would let a retry create a duplicate).
func (st *store) commitTransfer(ctx context.Context, t *transfer, c *claim) error {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	key := ""
	if c != nil {
		key = c.Key
	}
	if err := insertTransfer(ctx, tx, t, key); err != nil {
		return err
	}
	if c != nil {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET
			status = ?, owner = NULL, response_status = ?, response_body = ?, request_id = ?, transfer_id = ?
			WHERE key = ? AND owner = ? AND status = ?`,
			statusDone, c.Status, c.Body, c.RequestID, t.ID, c.Key, c.Token, statusInFlight)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errClaimLost
		}
	}
	return tx.Commit()
}

// release gives up a reservation without saving a result, so the client can
// retry with the same key. Only the owner's token can release it.
func (st *store) release(ctx context.Context, key, token string) error {
	_, err := st.db.ExecContext(ctx, `UPDATE idempotency_keys SET status = ?, owner = NULL
		WHERE key = ? AND owner = ? AND status = ?`, statusReleased, key, token, statusInFlight)
	return err
}

// --- stats -----------------------------------------------------------------

// KeyStats describes how an idempotency key has been used since it was first
// seen. Counters survive a released (failed) attempt; they reset only when the
// key expires.
type KeyStats struct {
	Key       string    `json:"key"`
	Requests  int       `json:"requests"`  // every POST that carried the key
	Replays   int       `json:"replays"`   // answered from the saved response
	Conflicts int       `json:"conflicts"` // 400 idempotency_error (different parameters)
	InUse     int       `json:"in_use"`    // 409 idempotency_key_in_use
	FirstSeen time.Time `json:"first_seen"`
	// TransferID is the transfer the key created, empty until one is committed.
	TransferID string `json:"transfer_id"`
	// Status is in_flight, done or released (see the package documentation).
	Status string `json:"status"`
}

const keyStatsQuery = `SELECT key, requests, replays, conflicts, in_use, first_seen_ns,
	COALESCE(transfer_id, ''), status FROM idempotency_keys WHERE first_seen_ns > ?`

func scanKeyStats(row rowScanner) (KeyStats, error) {
	var (
		ks        KeyStats
		firstSeen int64
	)
	err := row.Scan(&ks.Key, &ks.Requests, &ks.Replays, &ks.Conflicts, &ks.InUse, &firstSeen, &ks.TransferID, &ks.Status)
	ks.FirstSeen = time.Unix(0, firstSeen).UTC()
	return ks, err
}

// keyStats ignores expired rows that have not been purged yet, so stats agree
// with what the idempotency layer would do.
func (st *store) keyStats(ctx context.Context, key string, expiresBefore time.Time) (KeyStats, bool, error) {
	row := st.db.QueryRowContext(ctx, keyStatsQuery+` AND key = ?`, expiresBefore.UnixNano(), key)
	ks, err := scanKeyStats(row)
	if errors.Is(err, sql.ErrNoRows) {
		return KeyStats{}, false, nil
	}
	return ks, err == nil, err
}

func (st *store) allKeyStats(ctx context.Context, expiresBefore time.Time) ([]KeyStats, error) {
	rows, err := st.db.QueryContext(ctx, keyStatsQuery+` ORDER BY first_seen_ns, key`, expiresBefore.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []KeyStats{}
	for rows.Next() {
		ks, err := scanKeyStats(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ks)
	}
	return out, rows.Err()
}
