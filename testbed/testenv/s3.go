package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/s3server"
)

// S3Server is a real S3 server for a test: versitygw, an S3 gateway over a
// directory, with versioning and Object Lock (make s3-server).
type S3Server struct{ *s3server.Server }

// S3 starts versitygw on a free port over a temporary directory, with
// versioning on (Object Lock needs it), until the test ends.
func S3(t testing.TB) *S3Server {
	t.Helper()
	srv, err := s3server.Start(context.Background(), t.TempDir(), os.Stderr)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return &S3Server{srv}
}

// LockedBucket creates a bucket with Object Lock on and returns its
// gocloud URL, as BLOB_URL takes it.
func (s *S3Server) LockedBucket(t testing.TB, name string) string {
	t.Helper()
	u, err := s.Bucket(context.Background(), name, true, s.Endpoint)
	require.NoError(t, err)
	return u
}
