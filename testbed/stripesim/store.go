package stripesim

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// schemaVersion is stored in PRAGMA user_version so a future layout change can
// migrate (or refuse) an older file instead of misreading it.
const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS transfers (
	-- seq is the insertion order. AUTOINCREMENT guarantees it never goes
	-- backwards or reuses a value, which list pagination relies on to order
	-- transfers created in the same second.
	seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
	id                  TEXT    NOT NULL UNIQUE,
	amount              INTEGER NOT NULL,
	currency            TEXT    NOT NULL,
	destination         TEXT    NOT NULL,
	description         TEXT,
	transfer_group      TEXT,
	source_type         TEXT    NOT NULL,
	metadata            TEXT    NOT NULL DEFAULT '{}',
	balance_transaction TEXT    NOT NULL,
	destination_payment TEXT    NOT NULL,
	created             INTEGER NOT NULL,
	idempotency_key     TEXT
);
CREATE INDEX IF NOT EXISTS transfers_by_created ON transfers (created DESC, seq DESC);
CREATE INDEX IF NOT EXISTS transfers_by_group ON transfers (transfer_group, created DESC, seq DESC);
CREATE INDEX IF NOT EXISTS transfers_by_destination ON transfers (destination, created DESC, seq DESC);

CREATE TABLE IF NOT EXISTS idempotency_keys (
	key             TEXT    PRIMARY KEY,
	method          TEXT    NOT NULL,
	path            TEXT    NOT NULL,
	fingerprint     TEXT    NOT NULL,
	-- in_flight: a request owns the key and is executing.
	-- done:      the response is saved and will be replayed.
	-- released:  execution failed before commit; no result is saved and the
	--            key may be reused with any parameters (counters are kept).
	status          TEXT    NOT NULL CHECK (status IN ('in_flight', 'done', 'released')),
	owner           TEXT,
	reserved_ns     INTEGER NOT NULL,
	first_seen_ns   INTEGER NOT NULL,
	response_status INTEGER,
	response_body   BLOB,
	request_id      TEXT,
	transfer_id     TEXT,
	requests        INTEGER NOT NULL DEFAULT 0,
	replays         INTEGER NOT NULL DEFAULT 0,
	conflicts       INTEGER NOT NULL DEFAULT 0,
	in_use          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idempotency_keys_by_first_seen ON idempotency_keys (first_seen_ns);
`

// store is the SQLite persistence layer. It knows nothing about HTTP; time is
// passed in so the server's injectable clock governs everything.
type store struct {
	db *sql.DB
}

// openDB opens path (or a private in-memory database for "" / ":memory:").
//
// _txlock=immediate makes every transaction take SQLite's write lock at BEGIN.
// Without it, a read-then-write transaction in WAL mode fails with SQLITE_BUSY
// instead of waiting out busy_timeout when another writer got there first.
func openDB(path string) (*sql.DB, error) {
	const opts = "_pragma=busy_timeout(5000)&_txlock=immediate"
	memory := path == "" || path == ":memory:"
	var dsn string
	if memory {
		// A unique shared-cache name keeps each Open private, and one
		// connection means the database lives exactly as long as the pool.
		dsn = "file:" + newID("stripesim_", 16) + "?mode=memory&cache=shared&" + opts
	} else {
		dsn = "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&" + opts
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	if memory {
		db.SetMaxOpenConns(1)
	} else {
		// WAL gives concurrent readers alongside the single writer.
		db.SetMaxOpenConns(8)
	}
	db.SetConnMaxLifetime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func newStore(ctx context.Context, db *sql.DB) (*store, error) {
	st := &store{db: db}
	if err := st.migrate(ctx); err != nil {
		return nil, fmt.Errorf("stripesim: schema: %w", err)
	}
	return st, nil
}

func (st *store) migrate(ctx context.Context) error {
	var version int
	if err := st.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > schemaVersion {
		return fmt.Errorf("database schema version %d is newer than supported version %d", version, schemaVersion)
	}
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// --- transfers -------------------------------------------------------------

const transferColumns = `id, amount, currency, destination, description, transfer_group,
	source_type, metadata, balance_transaction, destination_payment, created`

type rowScanner interface{ Scan(dest ...any) error }

func scanTransfer(row rowScanner) (*transfer, error) {
	var (
		t        transfer
		desc, tg sql.NullString
		meta     string
	)
	err := row.Scan(&t.ID, &t.Amount, &t.Currency, &t.Destination, &desc, &tg,
		&t.SourceType, &meta, &t.BalanceTransaction, &t.DestinationPayment, &t.Created)
	if err != nil {
		return nil, err
	}
	if desc.Valid {
		t.Description = &desc.String
	}
	if tg.Valid {
		t.TransferGroup = &tg.String
	}
	if err := json.Unmarshal([]byte(meta), &t.Metadata); err != nil {
		return nil, fmt.Errorf("transfer %s: metadata: %w", t.ID, err)
	}
	t.finish()
	return &t, nil
}

func insertTransfer(ctx context.Context, tx *sql.Tx, t *transfer, idempotencyKey string) error {
	meta, err := json.Marshal(t.Metadata)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO transfers (`+transferColumns+`, idempotency_key)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Amount, t.Currency, t.Destination, t.Description, t.TransferGroup,
		t.SourceType, string(meta), t.BalanceTransaction, t.DestinationPayment, t.Created,
		sql.NullString{String: idempotencyKey, Valid: idempotencyKey != ""})
	return err
}

// getTransfer returns sql.ErrNoRows for an unknown ID.
func (st *store) getTransfer(ctx context.Context, id string) (*transfer, error) {
	row := st.db.QueryRowContext(ctx, `SELECT `+transferColumns+` FROM transfers WHERE id = ?`, id)
	return scanTransfer(row)
}

// listQuery is a validated GET /v1/transfers request.
type listQuery struct {
	Limit         int
	StartingAfter string
	EndingBefore  string
	TransferGroup *string
	Destination   *string
	Created       []createdBound // ANDed together
}

type createdBound struct {
	Op    string // one of = > >= < <=
	Value int64
}

// errCursorNotFound reports a starting_after/ending_before ID that does not exist.
var errCursorNotFound = errors.New("pagination cursor not found")

// listTransfers returns one page, newest first, ordered by (created, seq)
// descending so transfers from the same second still have a stable order.
//
// A page is read with LIMIT n+1 so has_more comes for free. ending_before
// pages walk the other way (ascending, the n items just newer than the
// cursor) and are flipped back to newest-first, as Stripe returns them.
func (st *store) listTransfers(ctx context.Context, q listQuery) ([]*transfer, bool, error) {
	where, args := []string{"1=1"}, []any{}
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if q.TransferGroup != nil {
		add("transfer_group = ?", *q.TransferGroup)
	}
	if q.Destination != nil {
		add("destination = ?", *q.Destination)
	}
	for _, b := range q.Created {
		add("created "+b.Op+" ?", b.Value)
	}
	order := "DESC"
	if cursor, forward := q.cursor(); cursor != "" {
		var created, seq int64
		err := st.db.QueryRowContext(ctx, `SELECT created, seq FROM transfers WHERE id = ?`, cursor).Scan(&created, &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, errCursorNotFound
		} else if err != nil {
			return nil, false, err
		}
		if forward {
			add("(created < ? OR (created = ? AND seq < ?))", created, created, seq)
		} else {
			add("(created > ? OR (created = ? AND seq > ?))", created, created, seq)
			order = "ASC"
		}
	}
	query := fmt.Sprintf(`SELECT %s FROM transfers WHERE %s ORDER BY created %s, seq %s LIMIT ?`,
		transferColumns, strings.Join(where, " AND "), order, order)
	args = append(args, q.Limit+1)

	page, err := st.queryTransfers(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	hasMore := len(page) > q.Limit
	if hasMore {
		page = page[:q.Limit]
	}
	if order == "ASC" {
		reverse(page)
	}
	return page, hasMore, nil
}

// cursor returns the pagination cursor and whether it pages towards older
// transfers (starting_after) or newer ones (ending_before).
func (q listQuery) cursor() (string, bool) {
	if q.EndingBefore != "" {
		return q.EndingBefore, false
	}
	return q.StartingAfter, true
}

func (st *store) queryTransfers(ctx context.Context, query string, args ...any) ([]*transfer, error) {
	rows, err := st.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*transfer
	for rows.Next() {
		t, err := scanTransfer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
