// Command example-plugin is a ContextForge/cpex external plugin server
// written on pkg/pluginserver: a deny-list and a redaction policy
// (pkg/pluginserver/policy), served over MCP Streamable HTTP, and also over
// gRPC (--grpc-addr host:port, or unix:///abs/path.sock for gRPC over a
// Unix socket) and cpex's raw Unix-socket transport (--unix-socket PATH)
// when asked.
//
// Usage:
//
//	example-plugin [--addr :8000] [--path /mcp] [--name NAME]...
//	               [--deny PATTERN]... [--redact PATTERN=REPLACEMENT]...
//	               [--mode sequential] [--priority 50]
//	               [--json-response] [--stateless] [--log-level info]
//	               [--grpc-addr HOST:PORT|unix:///PATH] [--unix-socket PATH]
//	               [--token TOKEN=EMAIL]... [--stdio]
//	example-plugin --policy FILE [--addr :8000] ...
//
// Each --token adds the TokenCheck plugin (http_auth_resolve_user,
// http_auth_check_permission): a request with a known bearer token is that
// e-mail's, an unknown one is refused with 401, one without a bearer token
// is left to the other identity sources, and a request none of them names
// is refused at its permission check (403).
//
// With flags, every --name (default ExamplePolicy) is served as a plugin
// with the same rules. With --policy, the YAML or JSON file lists the
// plugins (see policy.File) and the rule flags must not be given. With
// --stateless the server keeps no MCP sessions (MCP 2026-07-28 natively,
// older clients without a session), so replicas behind any load balancer
// serve any call. With --stdio it serves MCP on its stdin and stdout
// instead (started by the sidecar, mcp.proto STDIO) and exits when stdin
// closes. Logs are
// zerolog JSON on stderr. SIGINT or SIGTERM shuts the server down
// gracefully. GET /healthz answers 200 while serving.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "example-plugin: %v\n", err)
		os.Exit(1)
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// options are the parsed command line.
type options struct {
	addr, path, policyFile, mode, logLevel string
	grpcAddr, unixSocket                   string
	names, deny, redact, tokens            listFlag
	priority                               int
	jsonResponse, stateless, stdio         bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("example-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", ":8000", "listen address")
	fs.StringVar(&o.path, "path", "/mcp", "MCP endpoint path")
	fs.StringVar(&o.policyFile, "policy", "", "policy file (YAML or JSON) listing the plugins")
	fs.Var(&o.names, "name", "plugin name (repeatable; default "+policy.DefaultName+")")
	fs.Var(&o.deny, "deny", "regexp that blocks a matching tool/prompt/resource request (repeatable)")
	fs.Var(&o.redact, "redact", `PATTERN=REPLACEMENT rewrite in arguments and results (repeatable; "\=" for a literal "=" in PATTERN)`)
	fs.StringVar(&o.mode, "mode", "", "mode reported by get_plugin_config (default sequential)")
	fs.IntVar(&o.priority, "priority", policy.DefaultPriority, "priority reported by get_plugin_config (lower runs first)")
	fs.BoolVar(&o.jsonResponse, "json-response", false, "answer with application/json instead of SSE")
	fs.BoolVar(&o.stateless, "stateless", false, "keep no MCP sessions (MCP 2026-07-28; older clients served without a session)")
	fs.Var(&o.tokens, "token", "TOKEN=EMAIL: also serve the "+policy.DefaultTokenCheckName+" plugin (http_auth_resolve_user, http_auth_check_permission), which knows this bearer token and refuses anonymous callers (repeatable)")
	fs.BoolVar(&o.stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP (the sidecar's mcp.proto STDIO); --addr and the other transports are not served")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level (debug, info, warn, error)")
	fs.StringVar(&o.grpcAddr, "grpc-addr", "", "also serve cpex gRPC on host:port, or on unix:///abs/path.sock")
	fs.StringVar(&o.unixSocket, "unix-socket", "", "also serve cpex's Unix-socket transport on this absolute path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !strings.HasPrefix(o.path, "/") {
		return nil, fmt.Errorf("--path %q must start with /", o.path)
	}
	if o.unixSocket != "" && !filepath.IsAbs(o.unixSocket) {
		return nil, fmt.Errorf("--unix-socket %q must be an absolute path", o.unixSocket)
	}
	return &o, nil
}

// configs turns the options into plugin configs.
func (o *options) configs() ([]policy.Config, error) {
	if o.policyFile != "" {
		if len(o.names)+len(o.deny)+len(o.redact) > 0 {
			return nil, errors.New("--policy excludes --name, --deny and --redact")
		}
		return policy.LoadFile(o.policyFile)
	}
	var redact []policy.Redaction
	for _, r := range o.redact {
		red, err := policy.ParseRedaction(r)
		if err != nil {
			return nil, fmt.Errorf("--redact: %w", err)
		}
		redact = append(redact, red)
	}
	names := o.names
	if len(names) == 0 {
		names = listFlag{policy.DefaultName}
	}
	cfgs := make([]policy.Config, 0, len(names))
	for _, n := range names {
		prio := o.priority
		cfgs = append(cfgs, policy.Config{Name: n, Deny: o.deny, Redact: redact, Mode: o.mode, Priority: &prio})
	}
	return cfgs, nil
}

// tokenCheck returns the token-check plugin when --token was given.
func (o *options) tokenCheck() ([]pluginserver.Plugin, error) {
	if len(o.tokens) == 0 {
		return nil, nil
	}
	tokens := map[string]string{}
	for _, t := range o.tokens {
		tok, email, ok := strings.Cut(t, "=")
		if !ok || tok == "" || email == "" {
			return nil, errors.New("--token wants TOKEN=EMAIL")
		}
		tokens[tok] = email
	}
	p, err := policy.NewTokenCheck("", tokens)
	if err != nil {
		return nil, err
	}
	return []pluginserver.Plugin{p}, nil
}

// run serves until ctx ends. ready, if set, is called with the listening
// address once the server accepts connections.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Str("component", "example-plugin").Logger()

	cfgs, err := o.configs()
	if err != nil {
		return err
	}
	extraPlugins, err := o.tokenCheck()
	if err != nil {
		return err
	}
	ps, err := policy.NewServer(cfgs, &pluginserver.Options{JSONResponse: o.jsonResponse, Stateless: o.stateless, Logger: &log}, extraPlugins...)
	if err != nil {
		return err
	}

	if o.stdio {
		log.Info().Msg("serving on stdin/stdout")
		if err := ps.Serve(ctx, &mcp.StdioTransport{}); err != nil {
			return err
		}
		log.Info().Msg("stopped")
		return nil
	}
	srv := httpServer(o.path, ps, log)
	extra, err := startTransports(o, ps, log)
	if err != nil {
		return err
	}
	defer extra.stop()

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	names := make([]string, 0, len(cfgs))
	for _, c := range ps.Configs() {
		names = append(names, fmt.Sprint(c["name"]))
	}
	log.Info().Str("addr", ln.Addr().String()).Str("path", o.path).Strs("plugins", names).
		Bool("json_response", o.jsonResponse).Bool("stateless", o.stateless).Msg("serving")
	if ready != nil {
		ready(ln.Addr().String())
	}

	if err := serve(ctx, srv, ln, extra.errc, log); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// httpServer serves the plugin server ps on path, and /healthz.
func httpServer(path string, ps *pluginserver.Server, log zerolog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(path, ps.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// Long-lived SSE streams keep connections active; closing the sessions
	// ends them so that Shutdown can finish.
	srv.RegisterOnShutdown(func() {
		if err := ps.Close(); err != nil {
			log.Warn().Err(err).Msg("close plugin sessions")
		}
	})
	return srv
}

// serve runs srv on ln until ctx ends (then shuts it down gracefully) or
// either srv or another transport (extraErr) fails.
func serve(ctx context.Context, srv *http.Server, ln net.Listener, extraErr <-chan error, log zerolog.Logger) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case err := <-extraErr:
		_ = srv.Close()
		<-serveErr
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		log.Warn().Err(err).Msg("graceful shutdown incomplete; closing connections")
		_ = srv.Close()
	}
	<-serveErr // Serve returns ErrServerClosed once Shutdown or Close starts
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
