// Command codec-server serves the claim-data codec (internal/codec,
// AES-256-GCM) over HTTP so the Temporal Web UI and the temporal CLI can
// show encrypted payloads decoded:
//
//	temporal server start-dev --ui-codec-endpoint http://localhost:8081
//	temporal workflow show -w claim-123 --codec-endpoint http://localhost:8081
//
// It serves POST …/encode and …/decode (the Temporal remote codec protocol,
// via the SDK's converter.NewPayloadCodecHTTPHandler) and GET /healthz.
//
// Environment:
//
//	CODEC_KEYS_FILE     key file (JSON, see internal/codec; mode 0600 or 0400,
//	                    a file group or others can access is refused), or
//	CODEC_KEYS          the same JSON inline; without either, the programs'
//	                    default var/codec-keys.json (config.PayloadKeys)
//	CODEC_SERVER_ADDR   listen address (default localhost:8081)
//	CODEC_CORS_ORIGINS  comma list of browser origins allowed to call it
//	                    (default http://localhost:8233, the dev server's UI)
//	CODEC_AUTH_TOKENS   comma list; when set, requests need
//	                    "Authorization: Bearer <one of them>"; required
//	                    unless CODEC_SERVER_ADDR is a loopback address
//	CODEC_TLS_CERT_FILE, CODEC_TLS_KEY_FILE  serve HTTPS (the Web UI only
//	                    passes the user's access token to https endpoints)
//	LOG_LEVEL, LOG_FORMAT  as for the other binaries
//
// Without CODEC_AUTH_TOKENS anyone who can reach the server can decrypt
// claim data with it, so it then refuses to start unless CODEC_SERVER_ADDR
// is a loopback address (localhost, 127.0.0.0/8, ::1; ":8081" and
// "0.0.0.0:8081" are every interface), and warns when it is.
//
// codec-server -generate-key 2026-11 prints a new key file and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codec-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	genID := fs.String("generate-key", "", "print a new key file whose only, active key is named `ID` (e.g. 2026-11) to stdout, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: codec-server [-generate-key ID]\n\n"+
			"Serves the claim-data codec for the Temporal Web UI and CLI.\n"+
			"Configured by CODEC_KEYS_FILE or CODEC_KEYS, CODEC_SERVER_ADDR,\n"+
			"CODEC_CORS_ORIGINS, CODEC_AUTH_TOKENS, CODEC_TLS_CERT_FILE/CODEC_TLS_KEY_FILE.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "codec-server: unexpected arguments %q\n", fs.Args())
		return 2
	}

	if *genID != "" {
		return generateKey(*genID, stdout, stderr)
	}

	logger := config.Logger("codec-server")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, logger, os.Getenv); err != nil {
		logger.Error("codec-server stopped", "err", err)
		return 1
	}
	return 0
}

func generateKey(id string, stdout, stderr io.Writer) int {
	_, data, err := codec.GenerateKeyring(id)
	if err != nil {
		fmt.Fprintf(stderr, "codec-server: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(data); err != nil {
		fmt.Fprintf(stderr, "codec-server: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "codec-server: this is secret key material. Store it where only the service user can read it:\n"+
		"  (umask 077; codec-server -generate-key %s > keys.json); chmod 600 keys.json\n"+
		"or in your secret manager, and point CODEC_KEYS_FILE at it. To rotate, add the new key to the\n"+
		"existing file's \"keys\", make it \"active\", and keep the old keys for as long as their histories are read.\n", id)
	return 0
}

// listen opens the server's socket; tests replace it to see whether, and
// where, serve listens.
var listen = net.Listen

// serve runs the server until ctx is done (SIGINT or SIGTERM), then shuts
// down gracefully, letting requests in flight finish.
func serve(ctx context.Context, logger *slog.Logger, getenv func(string) string) error {
	kr, err := config.PayloadKeys()
	if err != nil {
		return err
	}
	if kr == nil {
		return errNoKeys
	}
	c, err := codec.New(kr)
	if err != nil {
		return err
	}
	s, err := loadSettings(getenv)
	if err != nil {
		return err
	}

	if len(s.tokens) == 0 {
		// Checked before listening: not even briefly may /decode be open
		// to the network without a token.
		if !config.IsLoopback(s.addr) {
			return fmt.Errorf("%w: %s=%q is not a loopback address, and anyone who can reach it could decrypt claim data; "+
				"set %s (comma list of bearer tokens), or listen on localhost only (e.g. %s=localhost:8081)",
				errNoTokensBeyondLoopback, envAddr, s.addr, envAuthTokens, envAddr)
		}
		logger.Warn("CODEC_AUTH_TOKENS is not set: anyone who can reach this address can decrypt claim data through /decode", "addr", s.addr)
	}

	ln, err := listen("tcp", s.addr)
	if err != nil {
		return err
	}
	httpSrv := &http.Server{
		Handler:           newHandler(c, s, logger),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if s.tlsCert != "" {
		scheme = "https"
	}
	logger.Info("codec-server listening",
		"endpoint", scheme+"://"+ln.Addr().String(),
		"keys", kr, // redacted: active key and IDs only
		"cors_origins", s.origins,
		"auth", len(s.tokens) > 0,
	)

	errc := make(chan error, 1)
	go func() {
		if s.tlsCert != "" {
			errc <- httpSrv.ServeTLS(ln, s.tlsCert, s.tlsKey)
		} else {
			errc <- httpSrv.Serve(ln)
		}
	}()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}
