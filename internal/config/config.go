// Package config reads the settings the binaries share from the
// environment, with the defaults docs/configuration.md lists, and connects to Temporal
// the way the Temporal CLI and SDK envconfig do (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS variables, profiles).
package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Get returns the variable or def when it is unset or empty.
func Get(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Duration reads a Go duration ("72h", "5s").
func Duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return d, nil
}

// Int reads a whole number.
func Int(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a whole number", name, v)
	}
	return n, nil
}

// Bool reads a true/false variable, or def when it is unset.
func Bool(name string, def bool) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// Logger builds the process logger from LOG_LEVEL (debug, info, warn, error)
// and LOG_FORMAT (text, json), with e-mail addresses and payout accounts
// masked (see Mask).
func Logger(component string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(Get("LOG_LEVEL", "info"))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if strings.EqualFold(Get("LOG_FORMAT", "text"), "json") {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(MaskHandler(h)).With("component", component)
}

// OwnerOnly makes every file and directory the process creates from now on
// readable by its owner only (umask 077): the claims DB and its WAL, the
// blob store's documents and transcripts, the mail spool. Claim data is
// nobody else's business on the host. The binaries call it first thing.
func OwnerOnly() { syscall.Umask(0o077) }

// PayloadKeys is the key ring every program encrypts and decrypts payloads
// with, so that the Temporal server, its database and anyone who reaches
// its frontend (a stolen task, a history, a memo) see no claim data:
// CODEC_KEYS_FILE or CODEC_KEYS; without either, DefaultKeysFile, which the
// first program to need it makes when the Temporal frontend is on this
// machine (every program here then shares it). A frontend elsewhere needs
// the keys given. PAYLOAD_ENCRYPTION=off runs without (development only):
// it returns nil.
func PayloadKeys() (*codec.Keyring, error) {
	switch v := Get("PAYLOAD_ENCRYPTION", "on"); v {
	case "off":
		return nil, nil
	case "on":
	default:
		return nil, fmt.Errorf("PAYLOAD_ENCRYPTION=%q: want on or off", v)
	}
	kr, err := codec.LoadFromEnv()
	if err != nil || kr != nil {
		return kr, err
	}
	kr, err = codec.LoadFile(DefaultKeysFile)
	if !errors.Is(err, fs.ErrNotExist) {
		return kr, err
	}
	if addr := Get("TEMPORAL_ADDRESS", client.DefaultHostPort); !IsLoopback(addr) {
		return nil, fmt.Errorf("payload encryption needs its keys: the Temporal frontend %s is not on this machine, so set %s to the key file "+
			"every program of this deployment shares (codec-server -generate-key ID makes one), or PAYLOAD_ENCRYPTION=off in development",
			addr, codec.EnvKeysFile)
	}
	return codec.CreateFile(DefaultKeysFile, "local-"+time.Now().UTC().Format("20060102"))
}

// DataConverter is the data converter every client uses: the SDK default
// with payloads encrypted by internal/codec (AES-256-GCM) with PayloadKeys,
// or without encryption when it is off. Code that decodes payloads read
// from history should use it too.
func DataConverter() (converter.DataConverter, error) {
	dc, _, err := dataConverter()
	return dc, err
}

// Converters are the data and failure converters every client of this
// project uses (Dial's): with payload encryption, failures are encoded with
// the same keys (their messages can carry claim data). A replay of the
// workflows' histories needs both: a failure's details it cannot decode
// change what the workflow code decides.
func Converters() (converter.DataConverter, converter.FailureConverter, error) {
	kr, err := PayloadKeys()
	if err != nil {
		return nil, nil, fmt.Errorf("payload encryption keys: %w", err)
	}
	dc, fc := ConvertersFor(kr)
	return dc, fc, nil
}

// ConvertersFor are Converters for the key ring kr (nil: no encryption).
func ConvertersFor(kr *codec.Keyring) (converter.DataConverter, converter.FailureConverter) {
	if kr == nil {
		return converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter()
	}
	dc := codec.DataConverter(kr)
	return dc, temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true,
	})
}

// dataConverter also returns the key ring, nil when encryption is off.
func dataConverter() (converter.DataConverter, *codec.Keyring, error) {
	kr, err := PayloadKeys()
	if err != nil {
		return nil, nil, fmt.Errorf("payload encryption keys: %w", err)
	}
	dc, _ := ConvertersFor(kr)
	return dc, kr, nil
}

// DialOption adjusts the client options Dial builds.
type DialOption func(*client.Options)

// WithMetrics sends the SDK's metrics (and the workflows' and activities')
// to h.
func WithMetrics(h client.MetricsHandler) DialOption {
	return func(o *client.Options) { o.MetricsHandler = h }
}

// WithDialOptions adds gRPC options to the connection (the worker's
// interceptors, say), after the SDK's own.
func WithDialOptions(d ...grpc.DialOption) DialOption {
	return func(o *client.Options) {
		o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, d...)
	}
}

// Dial connects to Temporal from the environment.
func Dial(ctx context.Context, logger *slog.Logger, options ...DialOption) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("temporal client settings: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	opts.Logger = log.NewStructuredLogger(logger)
	if opts.ConnectionOptions.GrpcCompression, err = GRPCCompression(opts.HostPort); err != nil {
		return nil, err
	}
	_, kr, err := dataConverter()
	if err != nil {
		return nil, err
	}
	if kr != nil {
		// Failure messages can carry claim data too (a provider's refusal
		// names the account): Converters encrypts them with the same keys.
		if opts.DataConverter, opts.FailureConverter, err = Converters(); err != nil {
			return nil, err
		}
		logger.Info("payload encryption on", "active_key", kr.Active, "key_ids", kr.IDs())
	} else {
		logger.Warn("PAYLOAD_ENCRYPTION=off: claim data reaches the Temporal server in clear, and anyone who reaches its frontend can read it (development only)")
	}
	if telemetry.On() {
		// The claim's trace crosses start, signal, update and every
		// activity in Temporal headers (internal/telemetry).
		ti, err := telemetry.TemporalInterceptor(otel.GetTracerProvider())
		if err != nil {
			return nil, err
		}
		opts.Interceptors = append(opts.Interceptors, ti)
	}
	for _, o := range options {
		o(&opts)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %q): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// GRPCCompression reads TEMPORAL_GRPC_COMPRESSION: "gzip" compresses every
// request to the frontend (the SDK's default), "none" sends them as they
// are. Unset, it is none when the frontend is on this machine (a loopback
// address) and gzip otherwise: on loopback gzip only spends CPU, on both
// sides, for bytes that never cross a wire (measured in
// docs/performance.md).
func GRPCCompression(hostPort string) (client.GrpcCompression, error) {
	v := Get("TEMPORAL_GRPC_COMPRESSION", "")
	switch {
	case v == "gzip", v == "" && !IsLoopback(hostPort):
		return &client.GrpcCompressionGzip{}, nil
	case v == "none", v == "":
		return &client.GrpcCompressionNone{}, nil
	}
	return nil, fmt.Errorf("TEMPORAL_GRPC_COMPRESSION=%q: want gzip or none", v)
}

// IsLoopback says whether addr (host:port) listens on this machine only:
// "localhost" or a loopback IP literal. An empty host (every interface), any
// other name (DNS decides what it is) or an address without a port is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
