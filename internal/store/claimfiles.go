package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// ClaimFile is where a closed claim's dossier is and its place in the
// claim-file log.
type ClaimFile struct {
	ClaimID     string               `json:"claim_id"`
	RunID       string               `json:"run_id"`
	Key         claim.IdempotencyKey `json:"key"`
	URI         string               `json:"uri"`
	SHA256      string               `json:"sha256"`
	Size        int64                `json:"size"`
	LogIndex    uint64               `json:"log_index"`
	LeafHash    string               `json:"leaf_hash"`
	Outcome     string               `json:"outcome"`
	RetainUntil time.Time            `json:"retain_until"`
	WrittenAt   time.Time            `json:"written_at"`
}

const claimFileColumns = `claim_id, run_id, key, uri, sha256, size, log_index, leaf_hash, outcome, retain_until, written_at`

func scanClaimFile(row interface{ Scan(...any) error }) (ClaimFile, error) {
	var f ClaimFile
	var key string
	var retain, written stamp
	err := row.Scan(&f.ClaimID, &f.RunID, &key, &f.URI, &f.SHA256, &f.Size, &f.LogIndex, &f.LeafHash, &f.Outcome, &retain, &written)
	f.Key, f.RetainUntil, f.WrittenAt = claim.IdempotencyKey(key), retain.Time, written.Time
	return f, err
}

// ClaimFile returns a claim's latest claim file: the one of the run that
// ended it (a dead-lettered run's, until a redrive ends it); ErrNotFound if
// none.
func (s *Store) ClaimFile(ctx context.Context, claimID string) (ClaimFile, error) {
	f, err := scanClaimFile(s.queryRow(ctx, `SELECT `+claimFileColumns+` FROM claim_files WHERE claim_id = ? ORDER BY log_index DESC LIMIT 1`, claimID))
	if errors.Is(err, sql.ErrNoRows) {
		return ClaimFile{}, fmt.Errorf("store: claim file of %s: %w", claimID, ErrNotFound)
	}
	return f, err
}

// ClaimFileOfRun returns the claim file a run wrote; ErrNotFound if none.
func (s *Store) ClaimFileOfRun(ctx context.Context, claimID, runID string) (ClaimFile, error) {
	f, err := scanClaimFile(s.queryRow(ctx, `SELECT `+claimFileColumns+` FROM claim_files WHERE claim_id = ? AND run_id = ?`, claimID, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return ClaimFile{}, fmt.Errorf("store: claim file of %s run %s: %w", claimID, runID, ErrNotFound)
	}
	return f, err
}

// AppendClaimFile records a run's claim file as the next leaf of the log,
// once per run: when the run has one already (an earlier attempt wrote it),
// that one is returned with existed true, and f is not recorded.
func (s *Store) AppendClaimFile(ctx context.Context, f ClaimFile) (ClaimFile, bool, error) {
	t, err := s.begin(ctx)
	if err != nil {
		return ClaimFile{}, false, err
	}
	defer func() { _ = t.Rollback() }()
	var size uint64
	if err := t.lock(ctx, `SELECT size FROM claim_file_log WHERE id = 1`).Scan(&size); err != nil {
		return ClaimFile{}, false, fmt.Errorf("store: claim-file log: %w", err)
	}
	held, err := scanClaimFile(t.queryRow(ctx, `SELECT `+claimFileColumns+` FROM claim_files WHERE claim_id = ? AND run_id = ?`,
		f.ClaimID, f.RunID))
	if err == nil {
		return held, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return ClaimFile{}, false, err
	}
	f.LogIndex, f.WrittenAt = size, s.stamp()
	if _, err := t.exec(ctx, `INSERT INTO claim_files (`+claimFileColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.ClaimID, f.RunID, string(f.Key), f.URI, f.SHA256, f.Size, f.LogIndex, f.LeafHash, f.Outcome,
		s.ts(f.RetainUntil.UTC().Truncate(time.Microsecond)), s.ts(f.WrittenAt)); err != nil {
		return ClaimFile{}, false, fmt.Errorf("store: claim file of %s: %w", f.ClaimID, err)
	}
	if _, err := t.exec(ctx, `UPDATE claim_file_log SET size = ? WHERE id = 1`, size+1); err != nil {
		return ClaimFile{}, false, err
	}
	if err := t.Commit(); err != nil {
		return ClaimFile{}, false, fmt.Errorf("store: claim file of %s: %w", f.ClaimID, err)
	}
	return f, false, nil
}

// ClaimFiles returns the log in order: leaf i is ClaimFiles()[i].
func (s *Store) ClaimFiles(ctx context.Context) ([]ClaimFile, error) {
	return s.claimFiles(ctx, `SELECT `+claimFileColumns+` FROM claim_files ORDER BY log_index`)
}

// ClaimFilesOf returns a claim's files in log order: one, or a dead-lettered
// run's and then the one of the run that ended the claim.
func (s *Store) ClaimFilesOf(ctx context.Context, claimID string) ([]ClaimFile, error) {
	return s.claimFiles(ctx, `SELECT `+claimFileColumns+` FROM claim_files WHERE claim_id = ? ORDER BY log_index`, claimID)
}

func (s *Store) claimFiles(ctx context.Context, q string, args ...any) ([]ClaimFile, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ClaimFile
	for rows.Next() {
		f, err := scanClaimFile(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// ClaimFileLogSize is how many claim files the log holds.
func (s *Store) ClaimFileLogSize(ctx context.Context) (uint64, error) {
	var size uint64
	err := s.queryRow(ctx, `SELECT size FROM claim_file_log WHERE id = 1`).Scan(&size)
	return size, err
}
