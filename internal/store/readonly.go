package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	litedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotMigrated means OpenReadOnly found a store whose schema is older
// than this build's (or none at all). A read-only store never migrates:
// starting a worker once (Open) brings the schema up to date.
var ErrNotMigrated = errors.New("not migrated to this build's schema")

// OpenReadOnly opens the existing store named by dsn (as Open names it) so
// that the database itself refuses every write: for a process that must be
// structurally unable to change the claims store. Every reading method
// works; every writing method fails with the database's own error
// (SQLITE_READONLY on SQLite, SQLSTATE 25006 read_only_sql_transaction on
// PostgreSQL), before anything is written.
//
// It never creates, migrates or locks the store: the schema must already be
// at the version this build's migrations end at, or later (a newer worker
// migrated it; its extra tables and columns are not read). An older schema
// is ErrNotMigrated.
//
// SQLite: the file must exist (neither it nor its directory is created). It
// is opened with mode=ro (SQLite opens the file O_RDONLY and refuses to
// write it) and PRAGMA query_only on every connection. It can be read while
// workers write it, from this process or others. A store in WAL mode (as
// Open leaves it) is read through its -wal and -shm files, so the directory
// matters:
//   - writable (the normal case): when no worker has the store open, SQLite
//     creates an empty -wal and -shm beside it to read it, and, unable to
//     write, leaves them there when it closes; they hold no data, and the
//     next worker to open and close the store uses and removes them.
//   - not writable by this process: reading works while a worker has the
//     store open (its -wal and -shm exist; if the -shm is not writable by
//     this process, SQLite reads through a private copy of its index, more
//     slowly). With no worker running, a clean close has removed them and
//     they cannot be created, so SQLite cannot read the store and
//     OpenReadOnly fails saying so (SQLITE_READONLY_DIRECTORY). Give the
//     reading user write access to the directory (not to the file), or read
//     while a worker runs.
//
// Open creates the file, -wal and -shm owner-only: a reader running as
// another user needs read access to all three.
//
// PostgreSQL: every connection sets default_transaction_read_only=on at
// startup (overriding any value the URL or PGOPTIONS gives) and is checked
// with SHOW default_transaction_read_only and SHOW transaction_read_only
// before use; a connection where either is off is refused. Every
// transaction, and every statement outside one, is then read-only. The
// server enforces it, but the session could turn it off again (this package
// never does): where a hard guarantee is needed against other code in the
// process, connect as a role granted only SELECT as well.
func OpenReadOnly(dsn string) (*Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		db   *sql.DB
		d    dialect
		dir  string
		name string
		err  error
	)
	if isPostgres(dsn) {
		name = redact(dsn)
		d, dir = postgres, "migrations/postgres"
		db, err = openPostgresReadOnly(ctx, dsn, name)
	} else {
		name = dsn
		d, dir = sqlite, "migrations/sqlite"
		db, err = openSQLiteReadOnly(ctx, dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, db, d, dir, name); err != nil {
		db.Close()
		return nil, err
	}
	d.readOnly = true
	return &Store{db: db, d: d, now: time.Now}, nil
}

// ReadOnly says whether the store was opened with OpenReadOnly: the
// database refuses its every write.
func (s *Store) ReadOnly() bool { return s.d.readOnly }

// openSQLiteReadOnly opens the existing file at path read-only, with no
// migration lock and no migration.
func openSQLiteReadOnly(ctx context.Context, path string) (*sql.DB, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("store: there is no claims store at %s (a read-only store is never created): %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("store: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("store: the claims store at %s is not a file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := sql.Open("sqlite", sqliteReadOnlyURI(abs))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	var queryOnly int
	if err := db.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&queryOnly); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s read-only: %w", path, err)
	}
	if queryOnly != 1 {
		db.Close()
		return nil, fmt.Errorf("store: open %s read-only: query_only is %d", path, queryOnly)
	}
	// The first read of the file is where a WAL store that cannot be read
	// says so.
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
		db.Close()
		var liteErr *litedriver.Error
		if errors.As(err, &liteErr) && liteErr.Code() == sqlite3.SQLITE_READONLY_DIRECTORY {
			return nil, fmt.Errorf("store: cannot read %s: no worker has it open, so SQLite must create its -wal and -shm files to read it, "+
				"and its directory is not writable by this process: %w", path, err)
		}
		return nil, fmt.Errorf("store: read %s: %w", path, err)
	}
	return db, nil
}

// sqliteReadOnlyURI names the SQLite file at the absolute path abs,
// opened read-only. mode=ro is SQLite's own: the driver hands the whole
// file: URI to sqlite3_open_v2, and mode=ro drops the create and read-write
// flags the driver opens with, so a missing file is an error, never created.
// The driver runs each _pragma on every new connection (busy_timeout first)
// and discards a connection where one fails. No _txlock=immediate (Open's):
// an immediate transaction asks for the write lock at its start.
func sqliteReadOnlyURI(abs string) string {
	// Escape what would end or change the path in a URI.
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	return "file:" + p + "?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(1)"
}

// openPostgresReadOnly connects through pgx with every session read-only.
func openPostgresReadOnly(ctx context.Context, dsn, name string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", name, err)
	}
	for k := range cfg.RuntimeParams {
		if strings.EqualFold(k, "default_transaction_read_only") {
			delete(cfg.RuntimeParams, k)
		}
	}
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(requireReadOnlySession))
	// A reader's share of the server's connections.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", name, err)
	}
	return db, nil
}

// requireReadOnlySession refuses (and closes) a new connection whose
// session is not read-only.
func requireReadOnlySession(ctx context.Context, conn *pgx.Conn) error {
	for _, setting := range []string{"default_transaction_read_only", "transaction_read_only"} {
		var v string
		err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v)
		if err == nil && v != "on" {
			err = fmt.Errorf("the session is not read-only: %s is %s", setting, v)
		}
		if err != nil {
			_ = conn.Close(ctx) // the driver does not close a connection it refuses
			return fmt.Errorf("read-only session: %w", err)
		}
	}
	return nil
}

// checkSchema refuses a store whose schema is older than this build's.
func checkSchema(ctx context.Context, db *sql.DB, d dialect, dir, name string) error {
	want, err := schemaVersion(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	exists := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`
	if d.name == postgres.name {
		exists = `SELECT count(*) FROM (SELECT to_regclass('goose_db_version') AS t) AS r WHERE t IS NOT NULL`
	}
	var tables int
	if err := db.QueryRowContext(ctx, exists).Scan(&tables); err != nil {
		return fmt.Errorf("store: schema of %s: %w", name, err)
	}
	var have int64
	if tables > 0 {
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(version_id), 0) FROM goose_db_version`).Scan(&have); err != nil {
			return fmt.Errorf("store: schema of %s: %w", name, err)
		}
	}
	if have < want {
		return fmt.Errorf("store: %w", &notMigrated{store: name, have: have, want: want})
	}
	return nil
}

// schemaVersion is the version the migrations in dir end at.
func schemaVersion(dir string) (int64, error) {
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return 0, err
	}
	var v int64
	for _, e := range entries {
		if path.Ext(e.Name()) != ".sql" {
			continue
		}
		n, err := goose.NumericComponent(e.Name())
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		v = max(v, n)
	}
	if v == 0 {
		return 0, fmt.Errorf("no migrations in %s", dir)
	}
	return v, nil
}

type notMigrated struct {
	store      string
	have, want int64
}

func (e *notMigrated) Error() string {
	return fmt.Sprintf("the claims store at %s is not migrated to this build's schema (version %d, want %d): start a worker once",
		e.store, e.have, e.want)
}

func (e *notMigrated) Is(target error) bool { return target == ErrNotMigrated }
