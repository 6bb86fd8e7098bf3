package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	litedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// refusedAsReadOnly asserts err is the database's own refusal to write:
// SQLITE_READONLY, or PostgreSQL's read_only_sql_transaction.
func refusedAsReadOnly(t *testing.T, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	var liteErr *litedriver.Error
	switch {
	case err == nil:
		t.Errorf("%s: a read-only store wrote", what)
	case errors.As(err, &pgErr):
		assert.Equal(t, "25006", pgErr.Code, "%s: %v", what, err)
	case errors.As(err, &liteErr):
		assert.Equal(t, sqlite3.SQLITE_READONLY, liteErr.Code()&0xff, "%s: %v", what, err)
	default:
		t.Errorf("%s: not the database's refusal: %v", what, err)
	}
}

func claimFileFor(id string) ClaimFile {
	sha := fmt.Sprintf("%064x", len(id))
	return ClaimFile{ClaimID: id, RunID: "run-" + id, Key: claim.StepKey(id, claim.StepAudit).Sub("claim-file"), URI: "file:///f/" + sha,
		SHA256: sha, Size: 10, LeafHash: sha, Outcome: "paid", RetainUntil: time.Date(2036, 12, 1, 0, 0, 0, 0, time.UTC)}
}

// storeContents is what the writes refused below would have changed.
func storeContents(t *testing.T, s *Store) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, table := range []string{"claims", "fraud_flags", "model_calls", "claim_files", "audit", "outbox", "refusals", "model_budget"} {
		var n int
		require.NoError(t, s.queryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		out[table] = n
	}
	for _, id := range []string{"claim-1", "claim-2"} {
		rec, err := s.GetClaim(ctx, id)
		require.NoError(t, err)
		out[id] = rec
	}
	size, err := s.ClaimFileLogSize(ctx)
	require.NoError(t, err)
	out["claim-file log"] = size
	return out
}

// A read-only store reads everything a worker wrote; the database refuses
// its every write, and nothing changes.
func TestOpenReadOnlyReadsAndTheDatabaseRefusesWrites(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, dsn string) {
		ctx := context.Background()
		_, _, err := s.PutClaim(ctx, testClaim("claim-1"))
		require.NoError(t, err)
		other := testClaim("claim-2")
		other.Claimant.StripeAccount = "acct_1Other" // the same e-mail
		_, _, err = s.PutClaim(ctx, other)
		require.NoError(t, err)
		_, _, err = s.AppendClaimFile(ctx, claimFileFor("claim-2"))
		require.NoError(t, err)
		_, err = s.FlagFraud(ctx, FraudFlag{Key: "claim-1:step2:flag:1", ClaimID: "claim-1", Signal: "duplicate-invoice"})
		require.NoError(t, err)
		require.NoError(t, s.RecordModelCall(ctx, ModelCall{CallID: "call-1", ClaimID: "claim-1", Key: "claim-1:step4", Provider: "p", Attempt: 1}))
		before := storeContents(t, s)

		ro, err := OpenReadOnly(dsn)
		require.NoError(t, err)
		defer ro.Close()
		assert.True(t, ro.ReadOnly())
		assert.False(t, s.ReadOnly())
		assert.Equal(t, s.Backend(), ro.Backend())

		rec, err := ro.GetClaim(ctx, "claim-1")
		require.NoError(t, err)
		assert.Equal(t, before["claim-1"], rec)
		files, err := ro.ClaimFiles(ctx)
		require.NoError(t, err)
		require.Len(t, files, 1)
		assert.Equal(t, "claim-2", files[0].ClaimID)
		prior, total, _, err := ro.PriorClaims(ctx, "claim-1", "ada@example.com", "acct_1Ada", 10)
		require.NoError(t, err)
		assert.Equal(t, 1, total)
		require.Len(t, prior, 1)
		assert.Equal(t, "claim-2", prior[0].ClaimID)
		flags, err := ro.FraudFlags(ctx, "claim-1")
		require.NoError(t, err)
		assert.Len(t, flags, 1)
		calls, err := ro.ModelCalls(ctx, "claim-1")
		require.NoError(t, err)
		assert.Len(t, calls, 1)

		refuseEveryWrite(t, ro)
		assert.Equal(t, before, storeContents(t, s), "the store is unchanged")

		// The worker's store still writes: the read-only store took no lock.
		_, _, err = s.PutClaim(ctx, testClaim("claim-3"))
		require.NoError(t, err)
		_, err = ro.GetClaim(ctx, "claim-3")
		require.NoError(t, err, "a read-only store sees what workers write")
	})
}

func refuseEveryWrite(t *testing.T, ro *Store) {
	t.Helper()
	ctx := context.Background()
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"PutClaim", func() error { _, _, err := ro.PutClaim(ctx, testClaim("claim-new")); return err }},
		{"CloseClaim", func() error {
			_, _, err := ro.CloseClaim(ctx, "claim-1", "claim-1:step8", StatusPaid, "tr_1", 184000)
			return err
		}},
		{"FlagFraud", func() error {
			_, err := ro.FlagFraud(ctx, FraudFlag{Key: "claim-1:step2:flag:2", ClaimID: "claim-1", Signal: "s"})
			return err
		}},
		{"RecordModelCall", func() error {
			return ro.RecordModelCall(ctx, ModelCall{CallID: "call-2", ClaimID: "claim-1", Key: "claim-1:step4", Provider: "p", Attempt: 2})
		}},
		{"AppendClaimFile", func() error { _, _, err := ro.AppendClaimFile(ctx, claimFileFor("claim-1")); return err }},
		{"Amend", func() error {
			_, err := ro.Amend(ctx, "claim-1", "adjuster-9", func(c *claim.Claim) error { c.AmountMinor = 1; return nil })
			return err
		}},
		{"Withdraw", func() error { _, err := ro.Withdraw(ctx, "claim-1"); return err }},
		{"WriteAudit", func() error { _, _, err := ro.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{}`)); return err }},
		{"ReserveMessage", func() error {
			_, err := ro.ReserveMessage(ctx, Message{Key: "claim-1:step7", ClaimID: "claim-1", Recipient: "ada@example.com", Subject: "s"})
			return err
		}},
		{"RecordRefusal", func() error {
			_, err := ro.RecordRefusal(ctx, Refusal{Key: "claim-1:update:u1", ClaimID: "claim-1", At: time.Now(), Reason: "unsigned"})
			return err
		}},
		{"ModelBudget", func() error { _, err := ro.ModelBudget(ctx, "what-if", 1000, 100); return err }},
	} {
		refusedAsReadOnly(t, w.write(), w.name)
	}
}

// On SQLite, query_only is the second wall: a connection that turns it
// off still cannot write a file it opened read-only.
func TestOpenReadOnlySQLiteOpensTheFileReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "claims.db")
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	ro, err := OpenReadOnly(path)
	require.NoError(t, err)
	defer ro.Close()
	conn, err := ro.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `PRAGMA query_only = 0`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `INSERT INTO claims (id, body, status, version, created_at, updated_at) VALUES ('x', '{}', 'open', 1, '', '')`)
	refusedAsReadOnly(t, err, "insert with query_only off")
}

// PostgreSQL: a URL asking for a writable session gets a read-only one.
func TestOpenReadOnlyPostgresOverridesTheURL(t *testing.T) {
	for _, b := range backends(t) {
		if b.name != "postgres" {
			continue
		}
		dsn := b.fresh(t)
		s, err := Open(dsn)
		require.NoError(t, err)
		defer s.Close()
		_, _, err = s.PutClaim(context.Background(), testClaim("claim-1"))
		require.NoError(t, err)
		ro, err := OpenReadOnly(dsn + "&default_transaction_read_only=off&DEFAULT_TRANSACTION_READ_ONLY=off")
		require.NoError(t, err)
		defer ro.Close()
		var on string
		require.NoError(t, ro.db.QueryRow(`SHOW transaction_read_only`).Scan(&on))
		assert.Equal(t, "on", on)
		_, err = ro.Withdraw(context.Background(), "claim-1")
		refusedAsReadOnly(t, err, "Withdraw")

		// PGOPTIONS's way: the server applies the startup parameter after
		// the options.
		ro2, err := OpenReadOnly(dsn + "&options=-c%20default_transaction_read_only%3Doff")
		require.NoError(t, err)
		defer ro2.Close()
		require.NoError(t, ro2.db.QueryRow(`SHOW transaction_read_only`).Scan(&on))
		assert.Equal(t, "on", on)
		_, _, err = ro2.PutClaim(context.Background(), testClaim("claim-2"))
		refusedAsReadOnly(t, err, "PutClaim")

		// A session that is not read-only is refused, and closed.
		conn, err := pgx.Connect(context.Background(), dsn)
		require.NoError(t, err)
		err = requireReadOnlySession(context.Background(), conn)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the session is not read-only: default_transaction_read_only is off")
		assert.True(t, conn.IsClosed())
	}
}

// A read-only store is never created: not the file, not its directory,
// not the migration lock. SQLite itself refuses to create it too.
func TestOpenReadOnlyNeverCreatesASQLiteStore(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "claims.db"), filepath.Join(dir, "sub", "claims.db")} {
		_, err := OpenReadOnly(path)
		require.Error(t, err)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.Contains(t, err.Error(), path)
	}
	db, err := sql.Open("sqlite", sqliteReadOnlyURI(filepath.Join(dir, "claims.db")))
	require.NoError(t, err)
	assert.Error(t, db.Ping(), "mode=ro never creates the file")
	require.NoError(t, db.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing created")
}

// The file: URI escapes the path: a store under a name with URI syntax in it.
func TestOpenReadOnlySQLitePathIsEscaped(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "claims.db"))
	require.NoError(t, err)
	_, _, err = s.PutClaim(context.Background(), testClaim("claim-1"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	odd := filepath.Join(dir, "what if?a=b&c#d%41 e.db")
	require.NoError(t, os.Rename(filepath.Join(dir, "claims.db"), odd))
	ro, err := OpenReadOnly(odd)
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.GetClaim(context.Background(), "claim-1")
	require.NoError(t, err)
}

// A store behind this build's schema is refused with what to do, and left
// as it was; one ahead of it (a newer worker migrated it) is read.
func TestOpenReadOnlyRefusesAStoreNotMigratedToThisBuild(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := b.fresh(t)
			dir, dialect, driver, raw := "migrations/postgres", goose.DialectPostgres, "pgx", dsn
			if b.name == "sqlite" {
				dir, dialect, driver, raw = "migrations/sqlite", goose.DialectSQLite3, "sqlite", "file:"+dsn
				require.NoError(t, os.WriteFile(dsn, nil, 0o600)) // an empty SQLite database
			}
			want, err := schemaVersion(dir)
			require.NoError(t, err)
			require.GreaterOrEqual(t, want, int64(5))
			notMigrated := func(have int64) {
				t.Helper()
				_, err := OpenReadOnly(dsn)
				require.ErrorIs(t, err, ErrNotMigrated)
				assert.Contains(t, err.Error(), fmt.Sprintf(
					"the claims store at %s is not migrated to this build's schema (version %d, want %d): start a worker once", Redact(dsn), have, want))
			}
			notMigrated(0)

			db, err := sql.Open(driver, raw)
			require.NoError(t, err)
			defer db.Close()
			tables := `SELECT count(*) FROM information_schema.tables WHERE table_name = 'goose_db_version'`
			if b.name == "sqlite" {
				tables = `SELECT count(*) FROM sqlite_master WHERE name = 'goose_db_version'`
			}
			var n int
			require.NoError(t, db.QueryRow(tables).Scan(&n))
			assert.Zero(t, n, "nothing was created")
			sub, err := fs.Sub(migrations, dir)
			require.NoError(t, err)
			p, err := goose.NewProvider(dialect, db, sub)
			require.NoError(t, err)
			_, err = p.UpTo(ctx, want-1)
			require.NoError(t, err)
			notMigrated(want - 1)
			version, err := p.GetDBVersion(ctx)
			require.NoError(t, err)
			assert.Equal(t, want-1, version, "a read-only store never migrates")

			s, err := Open(dsn) // a worker starts once
			require.NoError(t, err)
			defer s.Close()
			ro, err := OpenReadOnly(dsn)
			require.NoError(t, err)
			require.NoError(t, ro.Close())
			_, err = s.exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)`, want+1, true)
			require.NoError(t, err)
			ro, err = OpenReadOnly(dsn)
			require.NoError(t, err, "a newer schema is read")
			require.NoError(t, ro.Close())
		})
	}
}

func TestOpenReadOnlyKeepsPasswordsOutOfErrors(t *testing.T) {
	for _, dsn := range []string{
		"postgres://claims:s3cret-pass@127.0.0.1:1/claims?sslmode=disable&connect_timeout=2",
		"postgresql://claims:s3cret-pass@127.0.0.1:notaport/claims",
		"postgres://claims:s3cret-pass@127.0.0.1:1/claims?sslmode=bogus",
		"postgres://claims@127.0.0.1:1/claims?sslmode=disable&connect_timeout=2&password=s3cret-pass",
		"postgres://claims@127.0.0.1:1/claims?sslmode=disable&connect_timeout=2&sslpassword=s3cret-pass",
	} {
		_, err := OpenReadOnly(dsn)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cret-pass")
	}
}

// writerProcess is the other process of
// TestOpenReadOnlyReadsWhileAnotherProcessWrites (TestMain runs it when the
// test binary is started with STORE_READONLY_WRITER_DB): a worker that
// registers claims w-00000, w-00001, … until the stop file appears.
func writerProcess(path, stop string) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	deadline := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := os.Stat(stop); err == nil {
			return nil
		}
		if _, _, err := s.PutClaim(context.Background(), testClaim(fmt.Sprintf("w-%05d", i))); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("never told to stop")
}

// SQLite in WAL mode: a read-only store reads while a worker in another
// process writes, whether it opened before the worker (no -wal, no -shm)
// or while the worker was writing.
func TestOpenReadOnlyReadsWhileAnotherProcessWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "claims.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, _, err = s.PutClaim(ctx, testClaim("seed"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, suffix := range []string{"-wal", "-shm"} {
		_, err := os.Stat(path + suffix)
		require.ErrorIs(t, err, fs.ErrNotExist, "a clean close removes %s", suffix)
	}

	early, err := OpenReadOnly(path)
	require.NoError(t, err)
	defer early.Close()
	_, err = early.GetClaim(ctx, "seed")
	require.NoError(t, err)

	stop := filepath.Join(t.TempDir(), "stop")
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "STORE_READONLY_WRITER_DB="+path, "STORE_READONLY_WRITER_STOP="+stop)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()

	count := func(ro *Store) int {
		t.Helper()
		var n int
		require.NoError(t, ro.db.QueryRowContext(ctx, `SELECT count(*) FROM claims WHERE id LIKE 'w-%'`).Scan(&n))
		if n > 0 {
			_, err := ro.GetClaim(ctx, fmt.Sprintf("w-%05d", n-1))
			require.NoError(t, err)
		}
		return n
	}
	var late *Store
	seen, reads := 0, 0
	deadline := time.Now().Add(time.Minute)
	for seen < 200 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			waited = true // out is the test's to read
			t.Fatalf("the writer wrote %d claims in a minute: %s", seen, out.String())
		}
		select {
		case err := <-done:
			waited = true
			t.Fatalf("the writer ended early: %v: %s", err, out.String())
		default:
		}
		n := count(early)
		assert.GreaterOrEqual(t, n, seen, "commits are seen in order")
		seen = n
		reads++
		if late == nil && n > 0 {
			late, err = OpenReadOnly(path)
			require.NoError(t, err, "opened while the worker writes")
			defer late.Close()
		}
		if late != nil {
			assert.GreaterOrEqual(t, count(late), seen)
		}
	}
	_, _, err = early.PutClaim(ctx, testClaim("ro-1"))
	refusedAsReadOnly(t, err, "PutClaim while the worker writes")

	require.NoError(t, os.WriteFile(stop, nil, 0o600))
	err = <-done
	waited = true
	require.NoError(t, err, out.String())
	final := count(early)
	assert.GreaterOrEqual(t, final, seen)
	assert.Equal(t, final, count(late))
	t.Logf("%d reads while the other process wrote; %d claims", reads, final)
}
