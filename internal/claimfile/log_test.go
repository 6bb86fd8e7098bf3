package claimfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryClaimFileProvesItsPlaceInTheLog(t *testing.T) {
	key, public := testLedger(t)

	var files [][]byte
	var leaves [][]byte
	for i := range 13 {
		files = append(files, fmt.Appendf(nil, `{"claim_id":"claim-%04d"}`, i))
		leaves = append(leaves, LeafHash(files[i]))
	}
	origin := Origin("default")
	for size := 1; size <= len(leaves); size++ {
		cp, err := key.Sign(origin, leaves[:size])
		require.NoError(t, err)
		opened, err := OpenCheckpoint(cp.Note, origin, public)
		require.NoError(t, err)
		assert.Equal(t, uint64(size), opened.Size)
		for i := range size {
			hashes, err := InclusionProof(leaves, uint64(i), uint64(size))
			require.NoError(t, err)
			assert.NoError(t, VerifyInclusion(files[i], uint64(i), hashes, opened.Checkpoint), "leaf %d of %d", i, size)
			if i > 0 {
				assert.Error(t, VerifyInclusion(files[i], uint64(i-1), hashes, opened.Checkpoint), "leaf %d claimed at %d", i, i-1)
			}
		}
	}

	cp, err := key.Sign(origin, leaves)
	require.NoError(t, err)
	hashes, err := InclusionProof(leaves, 3, uint64(len(leaves)))
	require.NoError(t, err)
	changed := append([]byte{}, files[3]...)
	changed[len(changed)-3] ^= 1
	assert.Error(t, VerifyInclusion(changed, 3, hashes, cp.Checkpoint), "one byte changed")

	swapped := append([][]byte{}, leaves...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	root, err := Root(swapped)
	require.NoError(t, err)
	assert.NotEqual(t, cp.Hash, root, "two leaves swapped: another root")

	_, other := testLedger(t)
	_, err = OpenCheckpoint(cp.Note, origin, other)
	assert.Error(t, err, "another key's checkpoint")
	_, err = OpenCheckpoint(cp.Note, Origin("staging"), public)
	assert.Error(t, err, "another log's checkpoint")
	edited := []byte(string(cp.Note))
	edited[len(origin)+1] = '9'
	_, err = OpenCheckpoint(edited, origin, public)
	assert.Error(t, err, "an edited size")
}

// testLedger is a new ledger key named as the tests' insurer names theirs,
// and its public half.
func testLedger(t *testing.T) (LedgerKey, string) {
	t.Helper()
	private, public, err := GenerateLedgerKey("ledger-test")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ledger.key")
	require.NoError(t, os.WriteFile(path, []byte(private), 0o600))
	key, err := ReadLedgerKey(path)
	require.NoError(t, err)
	return key, public
}

// The published schema describes exactly the fields a claim file has.
func TestTheSchemaDescribesTheClaimFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "claim-file.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	for name, v := range map[string]any{"": File{}, "step": Step{}, "message": Message{}, "event": Event{}, "key": Key{}, "document": Document{}} {
		props := schema.Properties
		if name != "" {
			props = schema.Defs[name].Properties
		}
		var fields []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag)
		}
		assert.ElementsMatch(t, fields, slices.Collect(maps.Keys(props)), "schema %q", name)
	}
}
