package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// dialect is what differs between the backends; the SQL is otherwise one.
type dialect struct {
	name string
	// rebind turns the ? placeholders the queries are written with into
	// the backend's own.
	rebind func(string) string
	// forUpdate locks the rows a SELECT reads until the transaction ends
	// (SQLite needs none: a write transaction holds the database).
	forUpdate string
	// time is a time as the backend stores it: RFC 3339 text in SQLite
	// (sorting as text), timestamptz in PostgreSQL.
	time func(time.Time) any
	// bodyText and bodyInt read a field of a claim's JSON body.
	bodyText func(col, field string) string
	bodyInt  func(col, field string) string
	// claimant reads a field of the claimant in a claim's body: the same
	// expression the claims_by_email and claims_by_account indexes use.
	claimant func(field string) string
	// readOnly: the store was opened with OpenReadOnly, on a connection
	// the database itself refuses writes on.
	readOnly bool
}

var sqlite = dialect{
	name:      "sqlite",
	rebind:    func(q string) string { return q },
	time:      func(t time.Time) any { return t.UTC().Format(time.RFC3339Nano) },
	bodyText:  func(col, f string) string { return "json_extract(" + col + ", '$." + f + "')" },
	bodyInt:   func(col, f string) string { return "json_extract(" + col + ", '$." + f + "')" },
	claimant:  func(f string) string { return "json_extract(body, '$.claimant." + f + "')" },
	forUpdate: "",
}

var postgres = dialect{
	name: "postgres",
	rebind: func(q string) string {
		var b strings.Builder
		n := 0
		for _, r := range q {
			if r == '?' {
				n++
				b.WriteString("$" + strconv.Itoa(n))
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	},
	time:      func(t time.Time) any { return t.UTC() },
	bodyText:  func(col, f string) string { return "(" + col + "->>'" + f + "')" },
	bodyInt:   func(col, f string) string { return "(" + col + "->>'" + f + "')::bigint" },
	claimant:  func(f string) string { return "(body->'claimant'->>'" + f + "')" },
	forUpdate: " FOR UPDATE",
}

// stamp scans a stored time from either backend.
type stamp struct{ time.Time }

func (s *stamp) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		s.Time = v.UTC()
	case string:
		return s.parse(v)
	case []byte:
		return s.parse(string(v))
	case nil:
		s.Time = time.Time{}
	default:
		return fmt.Errorf("store: a time stored as %T", src)
	}
	return nil
}

func (s *stamp) parse(v string) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	s.Time = t.UTC()
	return err
}

//go:embed migrations
var migrations embed.FS

// IsPostgres says whether dsn selects the PostgreSQL backend.
func IsPostgres(dsn string) bool { return isPostgres(dsn) }

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Redact is dsn fit for logs: a URL's password hidden.
func Redact(dsn string) string {
	if !isPostgres(dsn) {
		return dsn
	}
	return redact(dsn)
}

// redact hides a URL's password in messages and logs: the user's, and a
// password or sslpassword query parameter (pgx takes either).
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a database URL that does not parse)"
	}
	if q := u.Query(); q.Has("password") || q.Has("sslpassword") {
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// openPostgres connects through pgx and migrates under a PostgreSQL
// advisory lock held for the session: ten workers starting at once run
// each migration once, the others wait and find nothing to do.
func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	name := redact(dsn)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", name, err)
	}
	// One process's share of the server's connections: a worker runs many
	// activities at once, each a short transaction.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", name, err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := migrate(ctx, db, goose.DialectPostgres, "migrations/postgres", goose.WithSessionLocker(locker)); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrating %s: %w", name, err)
	}
	return &Store{db: db, d: postgres, now: time.Now}, nil
}

// sqliteConns is how many SQLite connections a store opens at most, and
// keeps open between uses. SQLite runs one writer at a time (readers
// beside it, under WAL), so past the writer and a few readers more
// connections only wait on its lock (and poll for it: busy_timeout sleeps
// in steps of up to 100 ms) where they could wait in database/sql's pool
// and be handed a connection the moment one is free. Unbounded, a worker
// parking 20,000 claims opened 23 (docs/performance.md: the bound did not
// change its memory beyond the runs' noise, nor slow a burst of 5,000
// escalations).
const sqliteConns = 8

// openSQLite opens (creating if needed) the store file at path and
// migrates it while holding an exclusive lock on path.lock: processes
// sharing the file (one host) migrate one at a time.
func openSQLite(ctx context.Context, path string) (*Store, error) {
	// Owner-only, whatever the process umask: the claims DB holds every
	// claimant's name, e-mail and payout account. SQLite creates its -wal
	// and -shm files with the database file's permissions.
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("store: %w", err)
	}
	// WAL lets readers in other processes proceed during a write; busy_timeout
	// makes writers from several processes queue instead of failing, and
	// immediate transactions take the write lock up front so two writers never
	// deadlock upgrading a read lock. recursive_triggers: the row a REPLACE
	// deletes fires the approval queue's delete trigger, which keeps its
	// tally (migration queue_tally).
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=recursive_triggers(1)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// A new connection opens the file, runs the pragmas above and parses
	// the whole schema, triggers included: with database/sql's default of
	// two idle connections a worker running many local activities at once
	// closed and opened connections all the time, 13 % of its CPU in a
	// burst of escalations (docs/performance.md). So the connections a
	// burst uses are kept, and closed once idle for a minute; and there
	// are no more of them than sqliteConns.
	db.SetMaxOpenConns(sqliteConns)
	db.SetMaxIdleConns(sqliteConns)
	db.SetConnMaxIdleTime(time.Minute)
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	defer unlock()
	if err := upgradeUnversioned(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: schema in %s: %w", path, err)
	}
	if err := migrate(ctx, db, goose.DialectSQLite3, "migrations/sqlite"); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrating %s: %w", path, err)
	}
	return &Store{db: db, d: sqlite, now: time.Now, stmts: newStmtCache(db)}, nil
}

func migrate(ctx context.Context, db *sql.DB, d goose.Dialect, dir string, opts ...goose.ProviderOption) error {
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(d, db, fsys, opts...)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// lockFile takes an exclusive advisory lock on path (created 0600).
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// upgradeUnversioned brings a SQLite store made before migrations were
// versioned up to the first migration's columns (its tables exist, so the
// first migration's CREATE TABLE IF NOT EXISTS would not add them).
func upgradeUnversioned(ctx context.Context, db *sql.DB) error {
	var versioned, old int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`).Scan(&versioned); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'claims'`).Scan(&old); err != nil {
		return err
	}
	if versioned > 0 || old == 0 {
		return nil
	}
	for _, c := range []struct{ table, column, typ string }{
		{"claims", "amended_by", "TEXT"}, {"refusals", "code", "TEXT NOT NULL DEFAULT ''"}, {"refusals", "kid", "TEXT NOT NULL DEFAULT ''"},
	} {
		var table, n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, c.table).Scan(&table); err != nil {
			return err
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, c.table, c.column).Scan(&n); err != nil {
			return err
		}
		if table == 0 || n > 0 {
			continue // the first migration makes the table whole
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s`, c.table, c.column, c.typ)); err != nil {
			return err
		}
	}
	return nil
}

// system is the database's name in OpenTelemetry's db.system.name.
func (d dialect) system() string {
	if d.name == "postgres" {
		return "postgresql"
	}
	return d.name
}
