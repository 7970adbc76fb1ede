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
	fs := flag.NewFlagSet("extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envOr := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	configPath := fs.String("config", envOr("EXTPROC_CONFIG", ""), "plugin config file (cpex YAML) [EXTPROC_CONFIG]")
	grpcAddr := fs.String("grpc-addr", envOr("EXTPROC_GRPC_ADDR", ":50052"), "ext_proc and gRPC health listen address [EXTPROC_GRPC_ADDR]")
	adminAddr := fs.String("admin-addr", envOr("EXTPROC_ADMIN_ADDR", ":9090"), "admin HTTP address: /healthz /readyz /metrics [EXTPROC_ADMIN_ADDR]")
	logLevel := fs.String("log-level", envOr("EXTPROC_LOG_LEVEL", "info"), "log level: debug, info, warn, error [EXTPROC_LOG_LEVEL]")
	grace := fs.Duration("grace-period", 10*time.Second, "how long open streams may finish after SIGTERM")
	logBodies := fs.Bool("log-bodies", false, "with --log-level debug, also log request bodies (credential headers redacted); may expose secrets")
	withPprof := fs.Bool("pprof", false, "serve net/http/pprof on the admin address under /debug/pprof/")
	otlpEndpoint := fs.String("otlp-endpoint", envOr("EXTPROC_OTLP_ENDPOINT", ""), "export a span per plugin invocation over OTLP/gRPC to HOST:PORT; empty disables tracing [EXTPROC_OTLP_ENDPOINT]")
	otlpInsecure := fs.Bool("otlp-insecure", true, "send spans to --otlp-endpoint over plain gRPC (false: TLS)")
	checkOnly := fs.Bool("check-config", false, "validate the config file, print every problem, and exit 0 (valid) or 1")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "extproc: --config (or EXTPROC_CONFIG) is required")
		return 2
	}

	cfg, err := config.Load(*configPath)
	if *checkOnly {
		return reportCheck(*configPath, cfg, err, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "extproc: invalid config %s:\n%v\n", *configPath, err)
		return 1
	}

	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil || level == zerolog.NoLevel {
		fmt.Fprintf(stderr, "extproc: invalid --log-level %q\n", *logLevel)
		return 2
	}
	// Every line bounded (logsafe.MaxLine), whatever a client put in a field.
	log := zerolog.New(logsafe.NewWriter(stderr)).Level(level).With().Timestamp().Logger()
	for _, w := range cfg.Warnings {
		log.Warn().Str("plugin", w.Plugin).Str("field", w.Field).Msg(w.Message)
	}
	reload := make(chan struct{}, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hupCtx, stopHup := context.WithCancel(ctx)
	defer stopHup()
	go func() {
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
	err = sidecar.Run(ctx, sidecar.Options{
		Config:       cfg,
		ConfigPath:   *configPath,
		GRPCAddr:     *grpcAddr,
		AdminAddr:    *adminAddr,
		Logger:       log,
		GracePeriod:  *grace,
		Reload:       reload,
		Pprof:        *withPprof,
		LogBodies:    *logBodies,
		OTLPEndpoint: *otlpEndpoint,
		OTLPInsecure: *otlpInsecure,
	})
	if err != nil {
		log.Error().Err(err).Msg("mcp-extproc failed")
		return 1
	}
	return 0
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
