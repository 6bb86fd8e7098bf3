package testenv

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// VersityGWVersion is the S3 server the tests of stored records run: an S3
// gateway over a directory, with versioning and Object Lock (make s3-server).
const VersityGWVersion = "v1.8.0"

// S3Server is a real S3 server for a test.
type S3Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Client   *s3.Client
	// Env holds the credentials and region every program of the test needs.
	Env []string
}

const s3Access, s3Secret = "durableclaims-test", "durableclaims-test-secret"

// versityGW finds the versitygw binary: $VERSITYGW_BIN, then
// GOPATH/versitygw-v1.8.0 (make s3-server), then PATH.
func versityGW(t testing.TB) string {
	if p := os.Getenv("VERSITYGW_BIN"); p != "" {
		return p
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	require.NoError(t, err)
	p := filepath.Join(string(trimNL(gopath)), "versitygw-"+VersityGWVersion, "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	p, err = exec.LookPath("versitygw")
	require.NoError(t, err, "the S3 server is missing: make s3-server (go install github.com/versity/versitygw/cmd/versitygw@%s)", VersityGWVersion)
	return p
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// S3 starts versitygw on a free port over a temporary directory, with
// versioning on (Object Lock needs it), until the test ends.
func S3(t testing.TB) *S3Server {
	t.Helper()
	require.NoError(t, unitguard.Refuse("the S3 server versitygw"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	dir := t.TempDir()
	root, versions := filepath.Join(dir, "root"), filepath.Join(dir, "versions")
	require.NoError(t, os.Mkdir(root, 0o700))
	require.NoError(t, os.Mkdir(versions, 0o700))
	cmd := exec.Command(versityGW(t), "--port", addr, "--access", s3Access, "--secret", s3Secret, "--health", "/health", "--quiet",
		"posix", "--versioning-dir", versions, root)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := "http://" + addr
	require.Eventually(t, func() bool {
		res, err := http.Get(endpoint + "/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "versitygw never answered at %s", endpoint)
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3Access, s3Secret, "")})
	return &S3Server{Endpoint: endpoint, Client: c, Env: []string{"AWS_ACCESS_KEY_ID=" + s3Access, "AWS_SECRET_ACCESS_KEY=" + s3Secret,
		"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}}
}

// LockedBucket creates a bucket with Object Lock on and returns its
// gocloud URL, as BLOB_URL takes it.
func (s *S3Server) LockedBucket(t testing.TB, name string) string {
	t.Helper()
	_, err := s.Client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true)})
	require.NoError(t, err)
	return "s3://" + name + "?endpoint=" + s.Endpoint + "&region=us-east-1&use_path_style=true"
}
