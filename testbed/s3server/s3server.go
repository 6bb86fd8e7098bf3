// Package s3server runs a real S3 server for the rig: versitygw (make
// s3-server), an S3 gateway over a directory, with versioning and Object
// Lock, on a free loopback port. The end-to-end tests (testenv.S3) and the
// fault soak start it here.
package s3server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// Version is the versitygw make s3-server installs.
const Version = "v1.8.0"

// The credentials the server accepts.
const (
	AccessKey = "durableclaims-test"
	SecretKey = "durableclaims-test-secret"
)

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Client   *s3.Client
	// Env holds the credentials and region every program that reaches it
	// needs (the AWS SDK reads them from the environment).
	Env []string

	cmd  *exec.Cmd
	done chan struct{}
}

// Bin finds versitygw: $VERSITYGW_BIN, then GOPATH/versitygw-v1.8.0 (make
// s3-server), then PATH.
func Bin() (string, error) {
	if p := os.Getenv("VERSITYGW_BIN"); p != "" {
		return p, nil
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "versitygw-"+Version, "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return "", fmt.Errorf("the S3 server is missing: make s3-server (go install github.com/versity/versitygw/cmd/versitygw@%s)", Version)
	}
	return p, nil
}

// Start runs versitygw over dir (which it creates), its output to out, and
// waits until it answers.
func Start(ctx context.Context, dir string, out io.Writer) (*Server, error) {
	if err := unitguard.Refuse("the S3 server versitygw"); err != nil {
		return nil, err
	}
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	dir, err = filepath.Abs(dir) // versitygw takes relative paths against its root
	if err != nil {
		return nil, err
	}
	root, versions := filepath.Join(dir, "root"), filepath.Join(dir, "versions")
	for _, d := range []string{root, versions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, "--port", addr, "--access", AccessKey, "--secret", SecretKey, "--health", "/health", "--quiet",
		"posix", "--versioning-dir", versions, root)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s := &Server{Endpoint: "http://" + addr, cmd: cmd, done: make(chan struct{}),
		Env: []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
			"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}}
	go func() { _ = cmd.Wait(); close(s.done) }()
	s.Client = s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
	deadline := time.After(time.Minute)
	for {
		if res, err := http.Get(s.Endpoint + "/health"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, errors.New("versitygw exited before it answered")
		case <-deadline:
			s.Stop()
			return nil, fmt.Errorf("versitygw never answered at %s", s.Endpoint)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the server.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Bucket creates a bucket, with Object Lock on when locked, and returns its
// gocloud URL as BLOB_URL takes it, at endpoint (the server's own, or a
// proxy in front of it).
func (s *Server) Bucket(ctx context.Context, name string, locked bool, endpoint string) (string, error) {
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if locked {
		in.ObjectLockEnabledForBucket = aws.Bool(true)
	}
	if _, err := s.Client.CreateBucket(ctx, in); err != nil {
		return "", fmt.Errorf("create bucket %s: %w", name, err)
	}
	return URL(name, endpoint), nil
}

// URL is bucket's gocloud URL at endpoint.
func URL(bucket, endpoint string) string {
	return "s3://" + bucket + "?endpoint=" + endpoint + "&region=us-east-1&use_path_style=true"
}
