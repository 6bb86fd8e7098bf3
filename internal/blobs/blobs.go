// Package blobs keeps claim documents (photos, PDFs) and large model
// transcripts out of workflow history: they go to a blob store
// (gocloud.dev/blob: a file:// directory by default, s3://, gs:// or
// azblob:// by URL) and the workflow carries a reference — URI, SHA-256,
// size — so a 10 MiB photo costs a claim's history the same as a 1 KiB one.
//
// Only the file:// driver is registered here. A binary that opens a
// BLOB_URL from its configuration (the worker, the starter) blank-imports
// the cloud drivers itself (gocloud.dev/blob/s3blob, gcsblob, azureblob),
// so packages that merely use blobs do not pull in the cloud SDKs.
package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://, the default
	"gocloud.dev/gcerrors"

	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Ref identifies one stored object.
type Ref struct {
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// ErrTooLarge refuses objects over the store's limit.
var ErrTooLarge = errors.New("too large")

// ErrChanged is an object whose content is not what its reference says.
var ErrChanged = errors.New("changed since it was referenced")

// Store is a bucket and the URL it was opened from.
type Store struct {
	bucket  *blob.Bucket
	base    string
	MaxSize int64
	// LockMode puts records (PutRecord) under S3 Object Lock: LockCompliance,
	// LockGovernance, or empty for none.
	LockMode string
	file     bool // a file:// bucket
}

// DefaultURL is a directory under var/, created on first use, its
// directories owner-only (the files too, under the binaries' umask).
func DefaultURL() string {
	abs, err := filepath.Abs(filepath.Join("var", "blobs"))
	if err != nil {
		abs = filepath.Join(os.TempDir(), "durableclaims-blobs")
	}
	return "file://" + filepath.ToSlash(abs) + "?create_dir=true&dir_file_mode=0700"
}

// DefaultMaxSize is the largest document accepted (25 MiB).
const DefaultMaxSize = 25 << 20

// Open opens the bucket at url (DefaultURL when empty).
func Open(ctx context.Context, bucketURL string) (*Store, error) {
	if bucketURL == "" {
		bucketURL = DefaultURL()
	}
	opened, file := withFileDefaults(bucketURL)
	b, err := blob.OpenBucket(ctx, opened)
	if err != nil {
		return nil, fmt.Errorf("blob store %s: %w", redact(bucketURL), err)
	}
	base := bucketURL
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	return &Store{bucket: b, base: strings.TrimSuffix(base, "/"), MaxSize: DefaultMaxSize, file: file}, nil
}

// withFileDefaults opens a file:// bucket, unless its URL says otherwise,
// with each write's temporary file next to its object (no_tmp_dir) and no
// sidecar file of attributes (metadata=skip: nothing here reads them).
// The temporary file then lies in the bucket's owner-only directories,
// not in a world-listable os.TempDir; on the bucket's own filesystem, so
// the rename that publishes it works (from a tmpfs /tmp it fails with
// "invalid cross-device link"); and not in the one directory that every
// concurrent write locks: at 50 writes at once a claim file cost 0.58 ms
// of CPU that way, 0.20 ms this way (2026-12-07, ext4). file says whether
// it is a file:// bucket.
func withFileDefaults(bucketURL string) (opened string, file bool) {
	u, err := url.Parse(bucketURL)
	if err != nil || u.Scheme != "file" { // url.Parse lower-cases the scheme
		return bucketURL, false // blob.OpenBucket says what is wrong with it
	}
	q := u.Query()
	if !q.Has("no_tmp_dir") {
		q.Set("no_tmp_dir", "true")
	}
	if !q.Has("metadata") {
		q.Set("metadata", "skip")
	}
	u.RawQuery = q.Encode()
	return u.String(), true
}

// fileTemp is the name fileblob gives a write's temporary file next to
// its object (key.<nanoseconds in hex>.tmp): one a crash left behind is
// not an object.
var fileTemp = regexp.MustCompile(`\.[0-9a-f]+\.tmp$`)

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Put stores r under key, hashing as it goes, and returns its reference.
// Storing the same content under the same key again is harmless.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (_ Ref, err error) {
	ctx, span := telemetry.StartBlob(ctx, "put", key)
	defer func() { telemetry.End(span, err, "put failed") }()
	w, err := s.bucket.NewWriter(ctx, key, nil)
	if err != nil {
		return Ref{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, s.MaxSize+1))
	if err == nil && n > s.MaxSize {
		err = fmt.Errorf("%s is over %d bytes: %w", key, s.MaxSize, ErrTooLarge)
	}
	if err != nil {
		_ = w.Close()
		_ = s.bucket.Delete(ctx, key)
		return Ref{}, err
	}
	if err := w.Close(); err != nil {
		return Ref{}, err
	}
	return Ref{URI: s.base + "/" + key, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// DocumentKey is where a claim's i-th document is stored: the starter and
// intake use the same key, so storing it twice is harmless.
func DocumentKey(claimID string, i int, path string) string {
	return fmt.Sprintf("claims/%s/%d-%s", claimID, i, filepath.Base(path))
}

// ErrNotTheClaims refuses a document reference outside its claim's
// folder of this store: a claim cannot point at another claim's evidence,
// at a transcript, or at anything else the store holds.
var ErrNotTheClaims = errors.New("not one of this claim's documents")

// CheckDocument says whether uri may be one of claimID's documents: an
// object of this store under claims/<claimID>/, its key free of "..",
// empty and "." segments.
func (s *Store) CheckDocument(claimID, uri string) error {
	key, ok := s.Key(uri)
	if !ok {
		return fmt.Errorf("%s is not in this blob store (%s): %w", uri, redact(s.base), ErrNotTheClaims)
	}
	rest, ok := strings.CutPrefix(key, "claims/"+claimID+"/")
	if !ok || rest == "" || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%s is not under claims/%s/: %w", uri, claimID, ErrNotTheClaims)
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%s: a document key has no empty, \".\" or \"..\" segments: %w", uri, ErrNotTheClaims)
		}
	}
	return nil
}

// Verify reads the object a reference names and checks its size and hash.
func (s *Store) Verify(ctx context.Context, ref Ref) error {
	_, err := s.VerifyHead(ctx, ref, 0)
	return err
}

// VerifyHead verifies the object as Verify does and returns its first n
// bytes: one read for both.
func (s *Store) VerifyHead(ctx context.Context, ref Ref, n int) (_ []byte, err error) {
	ctx, span := telemetry.StartBlob(ctx, "verify", s.keyOf(ref.URI))
	defer func() { telemetry.End(span, err, "verify failed") }()
	r, err := s.open(ctx, ref.URI)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := sha256.New()
	head := &prefix{max: n}
	var src io.Reader = r
	if ref.Size > 0 {
		src = io.LimitReader(r, ref.Size+1) // more than that is changed: read no further
	}
	size, err := io.Copy(io.MultiWriter(h, head), src)
	if err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); size != ref.Size || got != ref.SHA256 {
		return nil, fmt.Errorf("%s: %d bytes sha256 %s, want %d bytes sha256 %s: %w", ref.URI, size, got[:12], ref.Size,
			ref.SHA256[:min(12, len(ref.SHA256))], ErrChanged)
	}
	return head.b, nil
}

// prefix keeps the first max bytes written to it.
type prefix struct {
	b   []byte
	max int
}

func (p *prefix) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// open reads the object at uri; one not stored is os.ErrNotExist.
func (s *Store) open(ctx context.Context, uri string) (*blob.Reader, error) {
	key, ok := s.Key(uri)
	if !ok {
		return nil, fmt.Errorf("%s is not in this blob store (%s): %w", uri, redact(s.base), ErrNotTheClaims)
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", uri, os.ErrNotExist)
	}
	return r, err
}

// keyOf is the key of a URI of this store, "" for any other.
func (s *Store) keyOf(uri string) string {
	key, _ := s.Key(uri)
	return key
}

// Key maps a URI of this store back to its key.
func (s *Store) Key(uri string) (string, bool) {
	return strings.CutPrefix(uri, s.base+"/")
}

// redact drops credentials a URL may carry in its query.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.RawQuery, p.User = "", nil
	return p.String()
}

// Get reads the object a reference names, at most max bytes of it. With
// the reference's digest it verifies the whole object first, however
// little of it is returned (an object that grew, shrank or changed is
// ErrChanged); without one, there is nothing to check it against.
func (s *Store) Get(ctx context.Context, ref Ref, max int64) ([]byte, error) {
	if ref.SHA256 != "" {
		return s.VerifyHead(ctx, ref, int(max))
	}
	r, err := s.open(ctx, ref.URI)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, max))
}

// ErrExists refuses to write over an object: records are written once.
var ErrExists = errors.New("already exists")

// PutRecord writes a record (a claim file, a checkpoint) that is never
// rewritten: only if no object has its key, and on S3 under Object Lock
// until retainUntil where the bucket has locking on (see records.md). A
// key already taken is ErrExists.
func (s *Store) PutRecord(ctx context.Context, key string, data []byte, retainUntil time.Time) (_ Ref, err error) {
	ctx, span := telemetry.StartBlob(ctx, "put_record", key)
	defer func() { telemetry.End(span, err, "put_record failed") }()
	opts := &blob.WriterOptions{IfNotExist: true, ContentType: "application/json", BeforeWrite: s.retention(retainUntil)}
	err = s.bucket.WriteAll(ctx, key, data, opts)
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return Ref{}, fmt.Errorf("%s: %w", key, ErrExists)
	}
	if err != nil {
		return Ref{}, err
	}
	sum := sha256.Sum256(data)
	return Ref{URI: s.base + "/" + key, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}, nil
}

// ReadKey reads the object at key, up to max bytes.
func (s *Store) ReadKey(ctx context.Context, key string, max int64) (_ []byte, err error) {
	ctx, span := telemetry.StartBlob(ctx, "read", key)
	defer func() { telemetry.End(span, err, "read failed") }()
	r, err := s.bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, os.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is over %d bytes: %w", key, max, ErrTooLarge)
	}
	return b, err
}

// List returns the keys under prefix, in order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		if s.file && fileTemp.MatchString(o.Key) {
			continue
		}
		keys = append(keys, o.Key)
	}
}

// URI is the URI of the object at key.
func (s *Store) URI(key string) string { return s.base + "/" + key }
