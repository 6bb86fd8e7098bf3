// Command server is the Temporal server (go.temporal.io/server v1.29.1)
// built with durableclaims' authorizer and claim mapper (package authz):
// the worker alone takes and answers the claims' tasks, an operator alone
// changes routing or resets, terminates and deletes runs, every other
// program may do only its job, and a call with no identity of ours is
// refused. It takes the stock server's command line:
//
//	server [--root DIR] [--config config] [--env development] [--zone Z] [--allow-no-auth] start [--service S]...
//
// The server's configuration names the authorizer: global.authorization
// authorizer and claimMapper "durableclaims" (with jwtKeyProvider for
// tokens, and the frontend's client CA for certificates). Without them it
// runs anonymous only with --allow-no-auth, as the stock server does; any
// other authorizer is refused.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	_ "time/tzdata" // zone data for schedules, as the stock server embeds

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/headers"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // the PostgreSQL persistence
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"     // the SQLite persistence, for a server on one machine
	"go.temporal.io/server/temporal"

	"github.com/durableclaims/durableclaims/temporalserver/authz"
)

// Name is what config's authorizer and claimMapper say for ours.
const Name = "durableclaims"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

type services []string

func (s *services) String() string     { return strings.Join(*s, ",") }
func (s *services) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	root := fs.String("root", ".", "root directory of the server's files")
	configDir := fs.String("config", "config", "configuration directory, relative to --root")
	env := fs.String("env", "development", "the configuration's environment (its file's name)")
	zone := fs.String("zone", "", "availability zone")
	allowNoAuth := fs.Bool("allow-no-auth", false, "run with an anonymous frontend when the configuration names no authorizer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 || fs.Arg(0) != "start" {
		return fmt.Errorf("usage: server [flags] start [--service NAME]... (Temporal server %s with durableclaims' authorizer)", headers.ServerVersion)
	}
	start := flag.NewFlagSet("start", flag.ContinueOnError)
	var only services
	start.Var(&only, "service", "a service to start (repeatable; default: all)")
	if err := start.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if len(only) == 0 {
		only = temporal.DefaultServices
	}

	cfg, err := config.LoadConfig(*env, filepath.Join(*root, *configDir), *zone)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger := log.NewZapLogger(log.BuildZapLogger(cfg.Log))
	dc := dynamicconfig.NewNoopClient()
	if cfg.DynamicConfigClient != nil {
		if dc, err = dynamicconfig.NewFileBasedClient(cfg.DynamicConfigClient, logger, temporal.InterruptCh()); err != nil {
			return fmt.Errorf("dynamic config: %w", err)
		}
	}
	opts := []temporal.ServerOption{
		temporal.ForServices(only), temporal.WithConfig(cfg), temporal.WithDynamicConfigClient(dc),
		temporal.WithLogger(logger), temporal.InterruptOn(temporal.InterruptCh()),
	}
	auth := cfg.Global.Authorization
	switch {
	case auth.Authorizer == Name && auth.ClaimMapper == Name:
		var jwt authorization.ClaimMapper
		if len(auth.JWTKeyProvider.KeySourceURIs) > 0 {
			jwt = authorization.NewDefaultJWTClaimMapper(authorization.NewDefaultTokenKeyProvider(&auth, logger), &auth, logger)
		}
		mapper := authz.ClaimMapper{JWT: jwt}
		opts = append(opts, temporal.WithAuthorizer(authz.Authorizer{Log: logger}),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return mapper }))
		logger.Info("durableclaims authorizer on", tag.NewBoolTag("tokens", jwt != nil))
	case auth.Authorizer == "" && auth.ClaimMapper == "" && *allowNoAuth:
		logger.Warn("no authorizer: anyone who reaches the frontend may call anything (--allow-no-auth)")
	default:
		return fmt.Errorf("global.authorization: want authorizer and claimMapper %q (or neither, with --allow-no-auth), not %q and %q",
			Name, auth.Authorizer, auth.ClaimMapper)
	}
	s, err := temporal.NewServer(opts...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.Start()
}
