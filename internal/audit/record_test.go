package audit

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "write testdata/record.json from the Record type")

// The record's JSON is what claim files already written hold and what
// the ledger hashed: its shape is pinned here. Every field is set (a
// value named by its JSON path), so a renamed, retyped, dropped or
// reordered field fails; a new field is added to the golden file with
// -update, and must be optional (omitempty) for records written before.
func TestRecordShape(t *testing.T) {
	var r Record
	fill(reflect.ValueOf(&r).Elem(), "record")
	got, err := json.MarshalIndent(r, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	golden := filepath.Join("testdata", "record.json")
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "the record's JSON changed; a new optional field: go test ./internal/audit/ -update")

	var back Record
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&back), "the golden record reads back into Record")
	assert.Equal(t, r, back)
}

// fill sets every field of v to a value named by its JSON path: strings
// to the path, numbers to its length, booleans true, times to a fixed
// instant, one element in every slice and map, every pointer set.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 5, 7, 0, len(path)%60, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			fill(v.Field(i), path+"."+name)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`"` + path + `"`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path+"[0]")
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, path+".key")
		fill(e, path+".value")
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(path)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(len(path)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(len(path)) / 4)
	case reflect.Bool:
		v.SetBool(true)
	}
}
