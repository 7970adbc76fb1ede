// Command extproc is the mcp-extproc sidecar: an Envoy ext_proc server that
// runs external MCP plugins (ContextForge/cpex protocol) on MCP traffic.
//
// Usage:
//
//	extproc --config plugins.yaml [--grpc-addr :50052] [--admin-addr :9090] [--log-level info]
//	extproc --config plugins.yaml --check-config
//
// Every flag can also be set by an environment variable (EXTPROC_CONFIG,
// EXTPROC_GRPC_ADDR, EXTPROC_ADMIN_ADDR, EXTPROC_LOG_LEVEL,
// EXTPROC_OTLP_ENDPOINT); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, ok := parseFlags(args, getenv, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(o.configPath)
	if o.checkOnly {
		return reportCheck(o.configPath, cfg, err, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "extproc: invalid config %s:\n%v\n", o.configPath, err)
		return 1
	}
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil || level == zerolog.NoLevel {
		fmt.Fprintf(stderr, "extproc: invalid --log-level %q\n", o.logLevel)
		return 2
	}
	// Every line bounded (logsafe.MaxLine), whatever a client put in a field.
	log := zerolog.New(logsafe.NewWriter(stderr)).Level(level).With().Timestamp().Logger()
	for _, w := range cfg.Warnings {
		log.Warn().Str("plugin", w.Plugin).Str("field", w.Field).Msg(w.Message)
	}
	// The Redis client of a shared attribution store logs through ours
	// (bounded lines), not to stderr on its own.
	redisstore.RouteClientLogs(log)
	reload, stopReload := reloadOnSIGHUP(ctx)
	defer stopReload()
	err = sidecar.Run(ctx, sidecar.Options{
		Config:       cfg,
		ConfigPath:   o.configPath,
		GRPCAddr:     o.grpcAddr,
		AdminAddr:    o.adminAddr,
		Logger:       log,
		GracePeriod:  o.grace,
		Reload:       reload,
		Pprof:        o.pprof,
		LogBodies:    o.logBodies,
		OTLPEndpoint: o.otlpEndpoint,
		OTLPInsecure: o.otlpInsecure,
	})
	if err != nil {
		log.Error().Err(err).Msg("mcp-extproc failed")
		return 1
	}
	return 0
}

// options are the command line, after the environment filled what the
// flags left unset.
type options struct {
	configPath, grpcAddr, adminAddr, logLevel, otlpEndpoint string
	grace                                                   time.Duration
	logBodies, pprof, otlpInsecure, checkOnly               bool
}

// parseFlags reads args, with defaults from getenv; ok is false when the
// command line is unusable (the reason went to stderr).
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (o options, ok bool) {
	fs := flag.NewFlagSet("extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&o.configPath, "config", envOr("EXTPROC_CONFIG", ""), "plugin config file (cpex YAML) [EXTPROC_CONFIG]")
	fs.StringVar(&o.grpcAddr, "grpc-addr", envOr("EXTPROC_GRPC_ADDR", ":50052"), "ext_proc and gRPC health listen address [EXTPROC_GRPC_ADDR]")
	fs.StringVar(&o.adminAddr, "admin-addr", envOr("EXTPROC_ADMIN_ADDR", ":9090"), "admin HTTP address: /healthz /readyz /metrics [EXTPROC_ADMIN_ADDR]")
	fs.StringVar(&o.logLevel, "log-level", envOr("EXTPROC_LOG_LEVEL", "info"), "log level: debug, info, warn, error [EXTPROC_LOG_LEVEL]")
	fs.DurationVar(&o.grace, "grace-period", 10*time.Second, "how long open streams may finish after SIGTERM")
	fs.BoolVar(&o.logBodies, "log-bodies", false, "with --log-level debug, also log request bodies (credential headers redacted); may expose secrets")
	fs.BoolVar(&o.pprof, "pprof", false, "serve net/http/pprof on the admin address under /debug/pprof/")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", envOr("EXTPROC_OTLP_ENDPOINT", ""), "export a span per plugin invocation over OTLP/gRPC to HOST:PORT; empty disables tracing [EXTPROC_OTLP_ENDPOINT]")
	fs.BoolVar(&o.otlpInsecure, "otlp-insecure", true, "send spans to --otlp-endpoint over plain gRPC (false: TLS)")
	fs.BoolVar(&o.checkOnly, "check-config", false, "validate the config file, print every problem, and exit 0 (valid) or 1")
	if err := fs.Parse(args); err != nil {
		return o, false
	}
	if o.configPath == "" {
		fmt.Fprintln(stderr, "extproc: --config (or EXTPROC_CONFIG) is required")
		return o, false
	}
	return o, true
}

// reloadOnSIGHUP turns SIGHUP into config reload requests (at most one
// pending) until ctx ends or stop is called; stop also ends the goroutine.
func reloadOnSIGHUP(ctx context.Context) (reload chan struct{}, stop func()) {
	reload = make(chan struct{}, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	hupCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hupCtx.Done():
				return
			case <-hup:
				select {
				case reload <- struct{}{}:
				default: // a reload is already pending
				}
			}
		}
	}()
	return reload, func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// reportCheck prints the result of --check-config.
func reportCheck(path string, cfg *config.Config, err error, stdout, stderr io.Writer) int {
	var verr *config.ValidationError
	switch {
	case errors.As(err, &verr):
		for _, p := range verr.Problems {
			fmt.Fprintf(stderr, "%s: %s\n", path, p)
		}
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", path, len(verr.Problems))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stdout, "%s: warning: %s\n", path, w)
	}
	fmt.Fprintf(stdout, "%s: OK (%d plugins)\n", path, len(cfg.Plugins))
	return 0
}
