package claimfile

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/store"
)

// CheckpointPrefix is where checkpoints are published in the blob store,
// one object per log size, never rewritten: claim-files/checkpoints/00000000000000000042.
const CheckpointPrefix = "claim-files/checkpoints/"

// CheckpointKey is where the checkpoint of a log of size files is.
func CheckpointKey(size uint64) string { return fmt.Sprintf("%s%020d", CheckpointPrefix, size) }

// Leaves reads the log's leaves from the store, in order, checking that
// the indices run 0, 1, 2, … without a gap.
func Leaves(ctx context.Context, st *store.Store) ([]store.ClaimFile, [][]byte, error) {
	files, err := st.ClaimFiles(ctx)
	if err != nil {
		return nil, nil, err
	}
	leaves := make([][]byte, len(files))
	for i, f := range files {
		if f.LogIndex != uint64(i) {
			return files, nil, fmt.Errorf("claim-file log: leaf %d is missing (the next row is %s at %d)", i, f.ClaimID, f.LogIndex)
		}
		if leaves[i], err = hex.DecodeString(f.LeafHash); err != nil || len(leaves[i]) != 32 {
			return files, nil, fmt.Errorf("claim-file log: leaf %d (%s) is not a SHA-256", i, f.ClaimID)
		}
	}
	return files, leaves, nil
}

// Publish signs a checkpoint of the log as the store holds it and publishes
// it, unless the latest published one already covers every file. Workers
// publish at intervals (CHECKPOINT_EVERY), claimsctl checkpoint on demand;
// two publishing the same size write the same bytes (Ed25519 signatures
// are deterministic), and the second finds it there.
func Publish(ctx context.Context, st *store.Store, bs *blobs.Store, key LedgerKey, namespace string, retainUntil time.Time) (Checkpoint, bool, error) {
	// The log has not grown since the last checkpoint: nothing to read.
	if size, err := st.ClaimFileLogSize(ctx); err == nil {
		if note, err := ReadCheckpoint(ctx, bs, size); err == nil {
			var cp log.Checkpoint
			if _, err := cp.Unmarshal(note); err == nil && cp.Size == size {
				return Checkpoint{Checkpoint: cp, Note: note}, false, nil
			}
		}
	}
	_, leaves, err := Leaves(ctx, st)
	if err != nil {
		return Checkpoint{}, false, err
	}
	origin := Origin(namespace)
	cp, err := key.Sign(origin, leaves)
	if err != nil {
		return Checkpoint{}, false, err
	}
	_, err = bs.PutRecord(ctx, CheckpointKey(cp.Size), cp.Note, retainUntil)
	if errors.Is(err, blobs.ErrExists) {
		return cp, false, nil
	}
	return cp, err == nil, err
}

// Published lists the published checkpoints' sizes, in order.
func Published(ctx context.Context, bs *blobs.Store) ([]uint64, error) {
	keys, err := bs.List(ctx, CheckpointPrefix)
	if err != nil {
		return nil, err
	}
	var sizes []uint64
	for _, k := range keys {
		n, err := strconv.ParseUint(strings.TrimPrefix(k, CheckpointPrefix), 10, 64)
		if err == nil {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	return sizes, nil
}

// ReadCheckpoint reads the published checkpoint of a log of size files.
func ReadCheckpoint(ctx context.Context, bs *blobs.Store, size uint64) ([]byte, error) {
	return bs.ReadKey(ctx, CheckpointKey(size), 64<<10)
}
