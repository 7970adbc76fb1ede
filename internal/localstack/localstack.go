// Package localstack runs the whole product on loopback in one process: the
// example plugin server, the mcp-extproc sidecar (the same code as
// cmd/extproc), the mcp-echo MCP server, and the strict Envoy stand-in of
// internal/envoytest as the HTTP front. The demo and the end-to-end tests
// use it; nothing here is used in production.
package localstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// Policy is the demo policy: deny "drop table", redact e-mail addresses.
var Policy = policy.Config{
	Name:   "ExamplePolicy",
	Deny:   []string{`(?i)drop\s+table`},
	Redact: []policy.Redaction{{Pattern: `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, Replacement: "[REDACTED]"}},
}

// ConfigTemplate is the sidecar's plugin config, in the cpex format; %s is
// the plugins: entries (one per plugin server, each with its transport
// section).
const ConfigTemplate = `# cpex / ContextForge plugin config, unchanged format
plugins:
%s
plugin_settings:
  # 10 s: a call in flight when its plugin restarts waits for the new
  # process, and a Node.js plugin server can take more than 5 s to start
  # on a busy 2-core machine.
  plugin_timeout: 10
  plugin_health_check_interval: 2
extproc:
  mcp_paths: ["/mcp"]
  # Rules (CEL, docs/rules.md): checked in the sidecar before any plugin;
  # the first also hides progress from the guest's tools/list.
  rules:
    - name: no-long-jobs-for-guests
      deny: 'mcp.name == "progress" && identity.user == "guest@example.com"'
      message: guests may not start long jobs
    - name: no-sudo
      deny: 'mcp.name == "echo" && has(mcp.arguments.message) && mcp.arguments.message.startsWith("sudo ")'
      message: echo does not say sudo
`

// Options configure a Stack.
type Options struct {
	Logger zerolog.Logger
	// Config overrides ConfigTemplate (a format string taking the plugins:
	// entries).
	Config string
	// Transports serve the demo policy (default: MCP alone). One transport
	// serves all of it as one plugin (Policy); two split it into a deny
	// plugin over the first and a redaction plugin over the second, both
	// in one config.
	Transports []Transport
	// Builtins, when set, are the plugins: entries, and no plugin server
	// starts: a stack of built-in plugins alone (docs/builtin-plugins.md).
	// Transports and Tokens are then ignored.
	Builtins string
	// Tokens, when set, add the example plugin's token check
	// (policy.NewTokenCheck: bearer token → e-mail) as a plugin served
	// over MCP by its own server, which RestartPlugin leaves running: a
	// request with an unknown token is refused (401), one that no identity
	// source names is refused at its permission check (403).
	Tokens map[string]string
}

// Stack is a running local stack.
type Stack struct {
	// URL is the MCP endpoint behind the Envoy stand-in.
	URL string
	// ConfigPath is the sidecar's config file.
	ConfigPath string
	// AdminURL is the sidecar's admin server.
	AdminURL string

	plugins  pluginServers
	auth     *authServer // Options.Tokens
	upstream *http.Server
	front    *http.Server
	proxy    *envoytest.Proxy
	closeExt func()
	cancel   context.CancelFunc
	done     chan error
}

// Start starts the stack; Close stops it.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	s := &Stack{done: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	cfg, err := s.startPlugins(opts)
	if err != nil {
		return nil, err
	}
	grpcAddr, err := s.startSidecar(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := s.startFront(grpcAddr, cfg); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// startPlugins starts one plugin server per transport and writes the
// sidecar's config naming them.
func (s *Stack) startPlugins(opts Options) (*config.Config, error) {
	dir, err := os.MkdirTemp("", "mcp-extproc-stack-")
	if err != nil {
		return nil, err
	}
	s.ConfigPath = filepath.Join(dir, "plugins.yaml")
	if opts.Builtins != "" {
		return s.writeConfig(opts, opts.Builtins)
	}
	transports := opts.Transports
	if len(transports) == 0 {
		transports = []Transport{MCP}
	}
	cfgs, err := policies(len(transports))
	if err != nil {
		return nil, err
	}
	for i, t := range transports {
		p, err := startPluginServer(cfgs[i], t, dir)
		if err != nil {
			return nil, fmt.Errorf("plugin %s over %s: %w", cfgs[i].Name, t, err)
		}
		s.plugins = append(s.plugins, p)
	}
	entries := s.plugins.entries()
	if len(opts.Tokens) > 0 {
		if s.auth, err = startAuth(opts.Tokens); err != nil {
			return nil, fmt.Errorf("token check: %w", err)
		}
		entries += s.auth.entry()
	}
	return s.writeConfig(opts, entries)
}

// writeConfig writes the sidecar's config with the plugins: entries, and
// loads it.
func (s *Stack) writeConfig(opts Options, entries string) (*config.Config, error) {
	tmpl := opts.Config
	if tmpl == "" {
		tmpl = ConfigTemplate
	}
	if err := os.WriteFile(s.ConfigPath, fmt.Appendf(nil, tmpl, entries), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// startSidecar runs the sidecar until Close and returns its gRPC address
// once it listens.
func (s *Stack) startSidecar(ctx context.Context, cfg *config.Config, opts Options) (net.Addr, error) {
	started := make(chan [2]net.Addr, 1)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		s.done <- sidecar.Run(runCtx, sidecar.Options{
			Config: cfg, ConfigPath: s.ConfigPath, GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
			Logger: opts.Logger, GracePeriod: 2 * time.Second,
			Started: func(g, a net.Addr) { started <- [2]net.Addr{g, a} },
		})
	}()
	select {
	case addrs := <-started:
		s.AdminURL = "http://" + addrs[1].String()
		return addrs[0], nil
	case err := <-s.done:
		s.done <- err
		return nil, fmt.Errorf("sidecar: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startFront starts the MCP server upstream and, in front of it, the Envoy
// stand-in calling the sidecar at grpcAddr.
func (s *Stack) startFront(grpcAddr net.Addr, cfg *config.Config) error {
	upLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.upstream = &http.Server{Handler: mcpecho.Handler(false), ReadHeaderTimeout: 5 * time.Second}
	go s.upstream.Serve(upLis)

	client, closer, err := envoytest.Dial(grpcAddr.String())
	if err != nil {
		return err
	}
	s.closeExt = func() { closer.Close() }
	s.proxy = &envoytest.Proxy{
		Filter: envoytest.Filter{
			Client:            client,
			AllowModeOverride: true,
			// As in envoy/envoy.yaml: what the identity sources, the
			// HTTP hooks' client_host and client_port, and the method
			// Envoy's MCP filter read.
			Forwarding: envoytest.Forwarding{
				MetadataNamespaces: []string{"envoy.filters.http.jwt_authn", envoytest.MCPFilterNamespace},
				RequestAttributes:  []string{"connection.uri_san_peer_certificate", "source.address", "source.port"},
			},
			// As in envoy/envoy.yaml: above the whole-hook deadline.
			MessageTimeout: cfg.HookTimeout() + time.Second,
		},
		Upstream: &url.URL{Scheme: "http", Host: upLis.Addr().String()},
		// As in envoy/envoy.yaml: Envoy's MCP filter before ext_proc.
		MCPFilter: &envoytest.MCPFilter{MaxRequestBodyBytes: 1 << 20},
	}
	frontLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.front = &http.Server{Handler: s.proxy, ReadHeaderTimeout: 5 * time.Second}
	go s.front.Serve(frontLis)
	s.URL = "http://" + frontLis.Addr().String() + "/mcp"
	return nil
}

// WaitReady waits until the sidecar reports ready.
func (s *Stack) WaitReady(ctx context.Context) error { return WaitReady(ctx, s.AdminURL) }

// WaitReady polls the sidecar's admin server at adminURL until /readyz
// answers 200 or ctx ends.
func WaitReady(ctx context.Context, adminURL string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, adminURL+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sidecar not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RestartPlugin stops every plugin server (its listener goes away, its
// connections are cut and its session store is lost) and starts a new one
// on the same address or socket path.
func (s *Stack) RestartPlugin() error { return s.plugins.restart() }

// NodeInitializes returns the initialize requests the plugin servers
// received over their life, when they are all the TypeScript SDK server
// (MCPNode); ok is false otherwise.
func (s *Stack) NodeInitializes() (n int, ok bool) { return s.plugins.nodeInitializes() }

// TakeCallers returns what the token check (Options.Tokens) was told about
// the caller in each http_auth_check_permission since the last call (at
// most the last 100), oldest first, and forgets them; nil without
// Options.Tokens.
func (s *Stack) TakeCallers() []Caller {
	if s.auth == nil {
		return nil
	}
	return s.auth.takeCallers()
}

// StopPlugin stops the plugin servers for good (until RestartPlugin).
func (s *Stack) StopPlugin() { s.plugins.halt() }

// Plugins names the stack's plugins with their transports, for display.
func (s *Stack) Plugins() []string {
	out := make([]string, len(s.plugins))
	for i, p := range s.plugins {
		out[i] = fmt.Sprintf("%s over %s (%s)", p.name, p.transport, p.addr)
	}
	if s.auth != nil {
		out = append(out, fmt.Sprintf("%s over mcp (%s)", policy.DefaultTokenCheckName, s.auth.addr))
	}
	return out
}

// Close stops everything.
func (s *Stack) Close() error {
	var errs []error
	if s.front != nil {
		s.front.Close()
	}
	if s.proxy != nil {
		s.proxy.CloseIdleConnections()
	}
	if s.cancel != nil {
		s.cancel()
		errs = append(errs, <-s.done)
	}
	if s.closeExt != nil {
		s.closeExt()
	}
	if s.upstream != nil {
		s.upstream.Close()
	}
	s.plugins.halt()
	if s.auth != nil {
		s.auth.close()
	}
	if s.ConfigPath != "" {
		os.RemoveAll(filepath.Dir(s.ConfigPath))
	}
	return errors.Join(errs...)
}
