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
	"sync"
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
// the plugin URL.
const ConfigTemplate = `# cpex / ContextForge plugin config, unchanged format
plugins:
  - name: ExamplePolicy
    kind: external
    on_error: fail
    mcp:
      proto: STREAMABLEHTTP
      url: %s
      reconnect_attempts: 3
      reconnect_delay: 0.05
plugin_settings:
  plugin_timeout: 5
  plugin_health_check_interval: 2
extproc:
  mcp_paths: ["/mcp"]
`

// Options configure a Stack.
type Options struct {
	Logger zerolog.Logger
	// Config overrides ConfigTemplate (a format string taking the plugin URL).
	Config string
}

// Stack is a running local stack.
type Stack struct {
	// URL is the MCP endpoint behind the Envoy stand-in.
	URL string
	// ConfigPath is the sidecar's config file.
	ConfigPath string
	// AdminURL is the sidecar's admin server.
	AdminURL string

	plugin   *restartable
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
	var err error
	s.plugin, err = startRestartable(func() (http.Handler, func() error, error) {
		srv, err := policy.NewServer([]policy.Config{Policy}, nil)
		if err != nil {
			return nil, nil, err
		}
		return srv.Handler(), srv.Close, nil
	})
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}

	dir, err := os.MkdirTemp("", "mcp-extproc-stack-")
	if err != nil {
		return nil, err
	}
	s.ConfigPath = filepath.Join(dir, "plugins.yaml")
	tmpl := opts.Config
	if tmpl == "" {
		tmpl = ConfigTemplate
	}
	if err := os.WriteFile(s.ConfigPath, fmt.Appendf(nil, tmpl, s.plugin.url()), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}

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
	var addrs [2]net.Addr
	select {
	case addrs = <-started:
	case err := <-s.done:
		s.done <- err
		return nil, fmt.Errorf("sidecar: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.AdminURL = "http://" + addrs[1].String()

	upLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.upstream = &http.Server{Handler: mcpecho.Handler(false), ReadHeaderTimeout: 5 * time.Second}
	go s.upstream.Serve(upLis)

	client, closer, err := envoytest.Dial(addrs[0].String())
	if err != nil {
		return nil, err
	}
	s.closeExt = func() { closer.Close() }
	s.proxy = &envoytest.Proxy{
		Filter: envoytest.Filter{
			Client:            client,
			AllowModeOverride: true,
			// As in envoy/envoy.yaml: above the whole-hook deadline.
			MessageTimeout: cfg.HookTimeout() + time.Second,
		},
		Upstream: &url.URL{Scheme: "http", Host: upLis.Addr().String()},
	}
	frontLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.front = &http.Server{Handler: s.proxy, ReadHeaderTimeout: 5 * time.Second}
	go s.front.Serve(frontLis)
	s.URL = "http://" + frontLis.Addr().String() + "/mcp"
	ok = true
	return s, nil
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

// RestartPlugin stops the plugin server (its listener goes away and its
// session store is lost) and starts a new one on the same address.
func (s *Stack) RestartPlugin() error { return s.plugin.restart() }

// StopPlugin stops the plugin server for good (until RestartPlugin).
func (s *Stack) StopPlugin() { s.plugin.stop() }

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
	if s.plugin != nil {
		s.plugin.stop()
	}
	if s.ConfigPath != "" {
		os.RemoveAll(filepath.Dir(s.ConfigPath))
	}
	return errors.Join(errs...)
}

// restartable is an HTTP server that can go away and come back on the same
// address with a fresh handler.
type restartable struct {
	newHandler func() (http.Handler, func() error, error)
	addr       string

	mu       sync.Mutex
	srv      *http.Server
	closeHdl func() error
}

func startRestartable(newHandler func() (http.Handler, func() error, error)) (*restartable, error) {
	r := &restartable{newHandler: newHandler, addr: "127.0.0.1:0"}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *restartable) url() string { return "http://" + r.addr + "/mcp" }

func (r *restartable) start() error {
	h, closeHdl, err := r.newHandler()
	if err != nil {
		return err
	}
	var lis net.Listener
	for i := 0; ; i++ {
		lis, err = net.Listen("tcp", r.addr)
		if err == nil {
			break
		}
		if i == 50 {
			return fmt.Errorf("listen %s: %w", r.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.addr = lis.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv, r.closeHdl = srv, closeHdl
	r.mu.Unlock()
	go srv.Serve(lis)
	return nil
}

func (r *restartable) stop() {
	r.mu.Lock()
	srv, closeHdl := r.srv, r.closeHdl
	r.srv, r.closeHdl = nil, nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	closeHdl()
	srv.Close()
}

func (r *restartable) restart() error {
	r.stop()
	return r.start()
}
