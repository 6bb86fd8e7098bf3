package codec

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Environment variables LoadFromEnv reads.
const (
	// EnvKeysFile names a JSON key file (see Keyring). It wins over EnvKeys
	// when both are set.
	EnvKeysFile = "CODEC_KEYS_FILE"
	// EnvKeys holds the same JSON inline.
	EnvKeys = "CODEC_KEYS"
)

// KeySize is the AES-256 key length in bytes.
const KeySize = 32

// maxKeyIDLen bounds a key ID; it travels in every payload's metadata.
const maxKeyIDLen = 64

// maxKeyFileSize bounds the key file we are willing to read.
const maxKeyFileSize = 1 << 20

// Keyring holds the AES-256 keys by ID. Active names the key new payloads
// are encrypted with; every key in Keys can decrypt. To rotate, add a new
// key, make it Active and keep the old ones for as long as histories
// encrypted with them must stay readable.
//
// Its JSON form (a key file, or CODEC_KEYS) is
//
//	{"active":"2026-11","keys":{"2026-11":"<base64 32 bytes>","2026-10":"<base64 32 bytes>"}}
//
// Printing, logging or marshalling a Keyring shows only the key IDs: the
// key material is never rendered (see String, Format, MarshalJSON,
// LogValue).
type Keyring struct {
	Active string
	Keys   map[string][]byte
}

// keyringFile is the on-disk and CODEC_KEYS JSON form.
type keyringFile struct {
	Active string            `json:"active"`
	Keys   map[string]string `json:"keys"`
}

// IDs returns the key IDs, sorted.
func (k Keyring) IDs() []string {
	ids := make([]string, 0, len(k.Keys))
	for id := range k.Keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Validate checks that the active key is present, that every key is
// exactly 32 bytes and that every ID is 1 to 64 printable ASCII
// characters. Its errors name key IDs, never key material.
func (k Keyring) Validate() error {
	if len(k.Keys) == 0 {
		return errors.New("codec: key ring has no keys")
	}
	for _, id := range k.IDs() {
		if err := validateKeyID(id); err != nil {
			return err
		}
		if n := len(k.Keys[id]); n != KeySize {
			return fmt.Errorf("codec: key %q is %d bytes, want exactly %d (AES-256)", id, n, KeySize)
		}
	}
	if k.Active == "" {
		return errors.New("codec: key ring has no active key")
	}
	if _, ok := k.Keys[k.Active]; !ok {
		return fmt.Errorf("codec: active key %q is not in the key ring (it has %s)", k.Active, strings.Join(k.IDs(), ", "))
	}
	return nil
}

func validateKeyID(id string) error {
	if id == "" {
		return errors.New("codec: empty key ID")
	}
	if len(id) > maxKeyIDLen {
		return fmt.Errorf("codec: key ID %q is longer than %d characters", id, maxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("codec: key ID %q: only printable ASCII is allowed", id)
		}
	}
	return nil
}

// String shows the active key and the key IDs, never the keys.
func (k Keyring) String() string {
	return fmt.Sprintf("codec.Keyring{Active: %q, Keys: [%s] (redacted)}", k.Active, strings.Join(k.IDs(), " "))
}

// GoString is String, so %#v redacts as well.
func (k Keyring) GoString() string { return k.String() }

// Format makes every fmt verb (%v, %+v, %#v, %s, %x, %q, …) print the
// redacted String, so no formatting of a Keyring can reveal key material.
func (k Keyring) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, k.String())
}

// MarshalJSON renders the redacted form {"active":…,"key_ids":[…]}. It is
// deliberately not the key-file format: a Keyring marshalled by accident
// (logged, returned from an API) carries no keys and cannot be loaded back.
func (k Keyring) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Active string   `json:"active"`
		KeyIDs []string `json:"key_ids"`
	}{k.Active, k.IDs()})
}

// LogValue makes slog render the redacted form.
func (k Keyring) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("active", k.Active),
		slog.Any("key_ids", k.IDs()),
	)
}

// Parse reads a key ring from its JSON form and validates it.
func Parse(data []byte) (*Keyring, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var f keyringFile
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, errors.New("codec: key ring JSON: unexpected data after the object")
	}
	kr := &Keyring{Active: f.Active, Keys: make(map[string][]byte, len(f.Keys))}
	for id, b64 := range f.Keys {
		if err := validateKeyID(id); err != nil {
			return nil, err
		}
		key, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", id, err)
		}
		kr.Keys[id] = key
	}
	if err := kr.Validate(); err != nil {
		return nil, err
	}
	return kr, nil
}

// jsonError describes a JSON error without quoting the input: a syntax
// error's message can include a character of a key.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("codec: key ring JSON: syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("codec: key ring JSON: field %q has the wrong type (want %s)", typ.Field, typ.Type)
	case errors.Is(err, io.EOF):
		return errors.New("codec: key ring JSON is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("codec: key ring JSON is truncated")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// Field names are ours to print: {"active":…,"keys":{…}} only.
		return fmt.Errorf("codec: key ring JSON: %s (want \"active\" and \"keys\")", strings.TrimPrefix(err.Error(), "json: "))
	default:
		return errors.New("codec: key ring JSON is not valid (want {\"active\":\"ID\",\"keys\":{\"ID\":\"base64 of 32 bytes\"}})")
	}
}

// decodeKey accepts standard or URL-safe base64, padded or not. Its errors
// never include the input.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("is %d bytes after base64 decoding, want exactly %d (AES-256)", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, errors.New("is not valid base64")
}

// LoadFile reads and validates a key file. It refuses a file whose
// permission bits grant anything to group or others (mode&0o077 != 0): its
// keys decrypt every claim, so only the service user may read it (chmod 600
// or 400). The mode checked is that of the file opened, after symlinks.
func LoadFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("codec: key file: %w", err)
	}
	defer f.Close()
	if err := checkKeyFileMode(f, path); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("codec: key file %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("codec: key file %s is larger than %d bytes", path, maxKeyFileSize)
	}
	kr, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return kr, nil
}

// checkKeyFileMode refuses an open key file that group or others may
// access. Windows has no such permission bits (os reports 0666 or 0444), so
// there the file's ACL is the operator's to set.
func checkKeyFileMode(f *os.File, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("codec: key file %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("codec: key file %s has mode %04o, which lets group or others access it, and its keys decrypt all claim data; "+
			"make it readable by its owner only: chmod 600 %s", path, perm, path)
	}
	return nil
}

// LoadFromEnv loads the key ring from the file named by CODEC_KEYS_FILE or,
// when that is unset, from the JSON in CODEC_KEYS. It returns (nil, nil)
// when neither is set: payload encryption is off.
func LoadFromEnv() (*Keyring, error) {
	if path := strings.TrimSpace(os.Getenv(EnvKeysFile)); path != "" {
		kr, err := LoadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeysFile, err)
		}
		return kr, nil
	}
	if inline := strings.TrimSpace(os.Getenv(EnvKeys)); inline != "" {
		kr, err := Parse([]byte(inline))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeys, err)
		}
		return kr, nil
	}
	return nil, nil
}

// GenerateKeyring makes a key ring with one fresh random key (crypto/rand)
// named id and active, and returns it with its key-file JSON. The JSON is
// secret: store it with mode 0600 (LoadFile refuses a key file group or
// others can access) or in a secret manager.
func GenerateKeyring(id string) (Keyring, []byte, error) {
	if err := validateKeyID(id); err != nil {
		return Keyring{}, nil, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return Keyring{}, nil, fmt.Errorf("codec: random key: %w", err)
	}
	kr := Keyring{Active: id, Keys: map[string][]byte{id: key}}
	data, err := kr.MarshalKeyFile()
	if err != nil {
		return Keyring{}, nil, err
	}
	return kr, data, nil
}

// CreateFile makes a key file at path with one fresh key named id, owner
// only, its directory too if missing, and returns its key ring. When path
// exists already (another program made it first) it is read instead.
func CreateFile(path, id string) (*Keyring, error) {
	kr, data, err := GenerateKeyring(id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("codec: key file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("codec: key file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("codec: key file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("codec: key file %s: %w", path, err)
	}
	return &kr, nil
}

// MarshalKeyFile renders the key ring in the key-file format, key material
// included (unlike MarshalJSON). For tooling that writes key files.
func (k Keyring) MarshalKeyFile() ([]byte, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	f := keyringFile{Active: k.Active, Keys: make(map[string]string, len(k.Keys))}
	for id, key := range k.Keys {
		f.Keys[id] = base64.StdEncoding.EncodeToString(key)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, errors.New("codec: marshal key file")
	}
	return append(data, '\n'), nil
}
