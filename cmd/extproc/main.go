// Command extproc is the mcp-extproc sidecar: an Envoy ext_proc server that
// runs external MCP plugins (ContextForge/cpex protocol) on MCP traffic.
//
// Usage:
//
//	extproc --config plugins.yaml [--grpc-addr :50052] [--admin-addr :9090] [--log-level info]
//	extproc --config plugins.yaml --check-config [--strict] [--skip-files]
//	extproc tools snapshot --url http://mcp-server:8080/mcp > tools.json
//	extproc --version | --help
//
// --check-config validates the file and exits 0 (usable) or 1, printing
// every problem as FILE:LINE: message; --strict also fails on warnings
// (unknown keys, an empty file or plugin list); --skip-files does not open
// the TLS files the config names, so a production config checks outside
// its Pod.
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

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
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
	if len(args) > 0 && args[0] == "tools" {
		return runTools(ctx, args[1:], stdout, stderr) // snapshot.go
	}
	o, code, done := parseFlags(args, getenv, stdout, stderr)
	if done {
		return code
	}
	if o.checkOnly {
		cfg, err := config.LoadWith(o.configPath, config.Options{SkipFiles: o.skipFiles})
		return reportCheck(o.configPath, cfg, err, o.strict, stdout, stderr)
	}
	cfg, err := config.Load(o.configPath)
	var verr *config.ValidationError
	switch {
	case errors.As(err, &verr):
		fmt.Fprintf(stderr, "extproc: invalid config %s:\n", o.configPath)
		printFindings(stderr, o.configPath, verr.Problems, verr.Warnings)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "extproc: invalid config %s: %v\n", o.configPath, err)
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
	logBodies, pprof, otlpInsecure                          bool
	checkOnly, strict, skipFiles, version                   bool
}

// usageHead comes before the list of flags in --help.
const usageHead = `extproc: the mcp-extproc sidecar, an Envoy ext_proc server that runs
external MCP plugins (ContextForge/cpex protocol) on MCP traffic.

Usage:
  extproc --config FILE [flags]        run the sidecar
  extproc --config FILE --check-config [--strict] [--skip-files]
                                       check FILE and exit: 0 usable, 1 not
  extproc --version                    print the version and commit
  extproc --help                       print this help

Flags:
`

// parseFlags reads args, with defaults from getenv. When done is true the
// command line has been handled (--help, --version) or is unusable (the
// reason went to stderr): run exits with code.
func parseFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (o options, code int, done bool) {
	fs := flag.NewFlagSet("extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below: on stdout for --help, on stderr for a mistake
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
	fs.BoolVar(&o.checkOnly, "check-config", false, "validate the config file, print every problem as FILE:LINE: message, and exit 0 (valid) or 1")
	fs.BoolVar(&o.strict, "strict", false, "with --check-config: fail on warnings too (unknown keys, an empty file or plugin list, ignored settings)")
	fs.BoolVar(&o.skipFiles, "skip-files", false, "with --check-config: do not open the TLS files the config names (certfile, keyfile, ca_bundle), to check a production config outside its Pod")
	fs.BoolVar(&o.version, "version", false, "print the version, commit and Go version, and exit")
	usage := func(w io.Writer) {
		fmt.Fprint(w, usageHead)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return o, 0, true
	case err != nil:
		usage(stderr)
		return o, 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "extproc: unexpected argument %q (every setting is a flag; see --help)\n", fs.Arg(0))
		return o, 2, true
	case o.version:
		fmt.Fprintln(stdout, buildinfo.String("extproc"))
		return o, 0, true
	case o.configPath == "":
		fmt.Fprintln(stderr, "extproc: --config (or EXTPROC_CONFIG) is required; see --help")
		return o, 2, true
	case (o.strict || o.skipFiles) && !o.checkOnly:
		fmt.Fprintln(stderr, "extproc: --strict and --skip-files apply to --check-config only")
		return o, 2, true
	}
	return o, 0, false
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

// reportCheck prints the result of --check-config and returns the exit
// code: problems on stderr as FILE:LINE: message (FILE:LINE:COLUMN: for a
// YAML syntax error), then warnings; 1 if there were problems, or warnings
// and strict.
func reportCheck(path string, cfg *config.Config, err error, strict bool, stdout, stderr io.Writer) int {
	var verr *config.ValidationError
	switch {
	case errors.As(err, &verr):
		printFindings(stderr, path, verr.Problems, verr.Warnings)
		fmt.Fprintf(stderr, "%s: %s, %s\n", path, count(len(verr.Problems), "problem"), count(len(verr.Warnings), "warning"))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 1
	case strict && len(cfg.Warnings) > 0:
		printFindings(stderr, path, nil, cfg.Warnings)
		fmt.Fprintf(stderr, "%s: %s (--strict fails on warnings)\n", path, count(len(cfg.Warnings), "warning"))
		return 1
	}
	printFindings(stdout, path, nil, cfg.Warnings)
	fmt.Fprintf(stdout, "%s: OK (%s, %s)\n", path, count(len(cfg.Plugins), "plugin"), count(len(cfg.Warnings), "warning"))
	return 0
}

// printFindings writes problems, then warnings, one a line.
func printFindings(w io.Writer, path string, problems, warnings []config.Problem) {
	for _, p := range problems {
		fmt.Fprintln(w, located(path, p, ""))
	}
	for _, p := range warnings {
		fmt.Fprintln(w, located(path, p, "warning: "))
	}
}

// located formats p as FILE:LINE[:COLUMN]: KIND TEXT, the form editors and
// CI annotations read (FILE: KIND TEXT when the line is unknown).
func located(path string, p config.Problem, kind string) string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s%s", path, p.Line, p.Column, kind, p.Text())
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s%s", path, p.Line, kind, p.Text())
	}
	return fmt.Sprintf("%s: %s%s", path, kind, p.Text())
}

// count writes "1 plugin", "3 plugins".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
