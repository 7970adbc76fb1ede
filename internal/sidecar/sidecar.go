// Package sidecar wires mcp-extproc together: configuration and its hot
// reload, the plugin clients, the executor, the ext_proc gRPC server with
// health, and the admin HTTP server. cmd/extproc parses flags and calls Run;
// tests and the demo run the same code in-process.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// Options configure a sidecar.
type Options struct {
	Config *config.Config
	// ConfigPath is watched for changes (hot reload) when set.
	ConfigPath string
	GRPCAddr   string
	AdminAddr  string
	Logger     zerolog.Logger
	// GracePeriod bounds how long open streams may run after a shutdown
	// signal. Default 10 s.
	GracePeriod time.Duration
	// ReadyCheckInterval is how often plugin states are read into the health
	// status. Default 500 ms.
	ReadyCheckInterval time.Duration
	// ReloadInterval is how often ConfigPath is checked for a change.
	// Default 2 s; negative disables polling (Reload still works).
	ReloadInterval time.Duration
	// Reload, if set, forces a reload on every receive (SIGHUP).
	Reload <-chan struct{}
	// Pprof serves net/http/pprof on the admin server.
	Pprof bool
	// LogBodies logs request bodies at debug level (credential headers
	// redacted); see processor.Options.LogBodies.
	LogBodies bool
	// OTLPEndpoint, if set (host:port), turns on span export over OTLP/gRPC:
	// one span per plugin invocation, child of the request's W3C trace
	// context. Empty means no tracing at all.
	OTLPEndpoint string
	// OTLPInsecure sends spans over plain gRPC instead of TLS.
	OTLPInsecure bool
	// Started, if set, receives the bound addresses once both servers listen.
	Started func(grpcAddr, adminAddr net.Addr)
	// AdminIdleTimeout closes idle keep-alive connections of the admin
	// server. Default DefaultAdminIdleTimeout.
	AdminIdleTimeout time.Duration
	// StreamWorkers is how many kept goroutines serve new ext_proc streams
	// (see grpcOptions). 0: DefaultStreamWorkers; negative: none, one new
	// goroutine per stream (grpc-go's default).
	StreamWorkers int
}

// ExtProcService is the gRPC service name reported by the health service.
const ExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor"

// generation is one configuration in force: the plugins and the executor
// built from it. Streams keep the generation they started with.
type generation struct {
	cfg  *config.Config
	set  *pluginSet
	exec *executor.Executor
	snap *processor.Snapshot
}

// Admin HTTP server defaults: the admin port serves probes and metrics
// scrapes, small and quick; anything slow or large is a misbehaving client.
const (
	DefaultAdminIdleTimeout = 60 * time.Second
	adminReadHeaderTimeout  = 5 * time.Second
	adminReadTimeout        = 10 * time.Second
	// adminWriteTimeout leaves room for a 30 s CPU profile on /debug/pprof.
	adminWriteTimeout   = 40 * time.Second
	adminMaxHeaderBytes = 64 << 10
	// closeTimeout bounds closing executors and plugin clients at the end.
	closeTimeout = 5 * time.Second
)

// sidecar is the running state Run owns.
type sidecar struct {
	opts    Options
	log     zerolog.Logger
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	current atomic.Pointer[generation]
	// retired holds work that outlives a reload: closing the executor and
	// the clients of a replaced generation once its streams are done.
	retired sync.WaitGroup
	// drained is done once Run has stopped and its open streams have ended:
	// retired generations may then close at once.
	drained context.Context
	// clientCtx bounds the background work of the plugin clients.
	clientCtx context.Context
	// tracing is nil unless Options.OTLPEndpoint is set.
	tracing *tracing
	// audit is nil unless extproc.audit.enabled was set at start: it is
	// opened once for the sidecar's life (a reload that changes the
	// section says it applies at the next start).
	audit *audit.Logger
	// pins are the tool pins of every generation (set up with the
	// attribution store, in its backend).
	pins toolpin.Store
}

// servers are the listeners and servers Run serves on.
type servers struct {
	grpcLis, adminLis net.Listener
	grpc              *grpc.Server
	health            *health.Server
	admin             *http.Server
	proc              *processor.Server
	ready             *readiness
	attr              *attributionStore
}

// Run runs the sidecar until ctx is done, then drains and returns nil, or
// returns the error that stopped it.
func Run(ctx context.Context, opts Options) error {
	if opts.Config == nil {
		return errors.New("sidecar: Options.Config is required")
	}
	opts = withDefaults(opts)
	drained, setDrained := context.WithCancel(context.WithoutCancel(ctx))
	defer setDrained()
	clientCtx, stopClients := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClients()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.BuildInfo(buildinfo.Version(), buildinfo.Commit(), buildinfo.GoVersion()))
	s := &sidecar{opts: opts, log: opts.Logger, reg: reg, metrics: metrics.New(reg), drained: drained, clientCtx: clientCtx}

	srv, err := s.setUp(ctx)
	if err != nil {
		return err
	}
	runErr := s.serve(ctx, srv)
	s.drain(ctx, srv, setDrained)
	return runErr
}

// withDefaults fills in the zero options.
func withDefaults(opts Options) Options {
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 10 * time.Second
	}
	if opts.ReadyCheckInterval == 0 {
		opts.ReadyCheckInterval = 500 * time.Millisecond
	}
	if opts.ReloadInterval == 0 {
		opts.ReloadInterval = 2 * time.Second
	}
	if opts.AdminIdleTimeout == 0 {
		opts.AdminIdleTimeout = DefaultAdminIdleTimeout
	}
	return opts
}

// setUp listens (before connecting to plugins, so that an address in use
// stops Run with nothing to clean up), starts tracing, builds the first
// generation and the servers. On error, everything it made is released.
func (s *sidecar) setUp(ctx context.Context) (_ *servers, err error) {
	srv := &servers{}
	defer func() {
		if err != nil {
			srv.closeListeners()
			s.closeAudit(ctx)
			s.shutdownTracing(ctx)
		}
	}()
	if srv.grpcLis, err = net.Listen("tcp", s.opts.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen grpc %s: %w", s.opts.GRPCAddr, err)
	}
	if srv.adminLis, err = net.Listen("tcp", s.opts.AdminAddr); err != nil {
		return nil, fmt.Errorf("listen admin %s: %w", s.opts.AdminAddr, err)
	}
	if s.opts.OTLPEndpoint != "" {
		if s.tracing, err = newTracing(ctx, s.opts.OTLPEndpoint, s.opts.OTLPInsecure); err != nil {
			return nil, err
		}
	}
	if s.audit, err = s.openAudit(ctx, &s.opts.Config.Extproc.Audit); err != nil {
		return nil, err
	}
	if srv.attr, err = newAttributionStore(&s.opts.Config.Extproc.Attribution, s.opts.Config.Extproc.ToolPinning.TTL, s.metrics, s.log.With().Str("component", "attribution").Logger()); err != nil {
		return nil, err
	}
	s.pins = srv.attr.pins
	gen, created, _, err := s.build(s.opts.Config, nil)
	if err != nil {
		return nil, err
	}
	startClients(s.clientCtx, created)
	s.current.Store(gen)
	s.metrics.ConfigApplied(time.Now())

	srv.proc = processor.New(s.processorOptions(srv.attr))
	srv.grpc = grpc.NewServer(s.grpcOptions()...)
	extprocv3.RegisterExternalProcessorServer(srv.grpc, srv.proc)
	srv.health = health.NewServer()
	healthpb.RegisterHealthServer(srv.grpc, srv.health)
	srv.ready = &readiness{current: func() *generation { return s.current.Load() }, started: map[string]bool{}}
	srv.admin = s.adminServer(srv.ready)
	return srv, nil
}

// processorOptions are the ext_proc server's options. The audit logger and
// the tracer are set only when on: a nil one costs the processor nothing
// per request.
func (s *sidecar) processorOptions(attr *attributionStore) processor.Options {
	opts := processor.Options{
		Logger:   s.log.With().Str("component", "processor").Logger(),
		Snapshot: func() *processor.Snapshot { return s.current.Load().snap },
		Observer: s.metrics,
		// The request's trace context and x-request-id follow each tool
		// call into its plugins, with or without an exporter.
		WithHeaders: continueTrace,
		LogBodies:   s.opts.LogBodies,
		// One memory of forwarded requests and tasks for the sidecar's
		// life: a reload must not forget what was forwarded before it.
		Attribution: attr,
	}
	if s.audit != nil { // never a nil *audit.Logger in the interface
		opts.Audit = s.audit
	}
	if s.tracing != nil {
		// The server span of each request; the plugin invocation spans
		// (tracedPlugins) are its children.
		opts.Tracer = s.tracing.tracer
	}
	return opts
}

// adminServer is the admin HTTP server, with timeouts and a header cap so
// that no client can hold its connections or memory.
func (s *sidecar) adminServer(ready *readiness) *http.Server {
	return &http.Server{
		Handler:           adminMux(s.reg, ready, s.opts.Pprof),
		ReadHeaderTimeout: adminReadHeaderTimeout,
		ReadTimeout:       adminReadTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       s.opts.AdminIdleTimeout,
		MaxHeaderBytes:    adminMaxHeaderBytes,
	}
}

// closeListeners closes the listeners that are open (after a failed set-up).
func (srv *servers) closeListeners() {
	for _, l := range []net.Listener{srv.grpcLis, srv.adminLis} {
		if l != nil {
			l.Close()
		}
	}
	if srv.attr != nil {
		srv.attr.close()
	}
}

// setHealth reports serving or not on the gRPC health service.
func (srv *servers) setHealth(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	srv.health.SetServingStatus("", st)
	srv.health.SetServingStatus(ExtProcService, st)
}

// serve runs both servers and the event loop (readiness, reloads) until ctx
// is done or a server stops; it returns the error that stopped it.
func (s *sidecar) serve(ctx context.Context, srv *servers) error {
	srv.setHealth(srv.ready.check())
	errc := make(chan error, 2)
	go func() { errc <- srv.grpc.Serve(srv.grpcLis) }()
	go func() {
		if err := srv.admin.Serve(srv.adminLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	if s.opts.Started != nil {
		s.opts.Started(srv.grpcLis.Addr(), srv.adminLis.Addr())
	}
	s.log.Info().Str("grpc_addr", srv.grpcLis.Addr().String()).Str("admin_addr", srv.adminLis.Addr().String()).
		Int("plugins", len(s.opts.Config.Plugins)).Msg("mcp-extproc started")

	w := newWatcher(s.opts.ConfigPath)
	ticker := time.NewTicker(s.opts.ReadyCheckInterval)
	defer ticker.Stop()
	var reloadTick <-chan time.Time
	if s.opts.ConfigPath != "" && s.opts.ReloadInterval > 0 {
		rt := time.NewTicker(s.opts.ReloadInterval)
		defer rt.Stop()
		reloadTick = rt.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return fmt.Errorf("server stopped: %w", err)
		case <-ticker.C:
			srv.setHealth(srv.ready.check())
		case <-reloadTick:
			if w.changed() {
				s.reload(w)
			}
		case <-s.opts.Reload:
			w.changed() // take in the current content
			s.reload(w)
		}
	}
}

// drain reports NOT_SERVING, refuses new streams, lets open ones finish
// within the grace period, then closes the audit logger, the plugin
// clients, the admin server and tracing.
func (s *sidecar) drain(ctx context.Context, srv *servers, setDrained func()) {
	s.log.Info().Dur("grace_period", s.opts.GracePeriod).Msg("shutting down: draining streams")
	srv.ready.draining.Store(true)
	srv.health.Shutdown()
	srv.proc.Drain()
	stopped := make(chan struct{})
	go func() { srv.grpc.GracefulStop(); close(stopped) }()
	grace := time.NewTimer(s.opts.GracePeriod)
	select {
	case <-stopped:
		grace.Stop()
	case <-grace.C:
		s.log.Warn().Int64("open_streams", srv.proc.OpenStreams()).Msg("grace period over: closing open streams")
		srv.grpc.Stop()
		<-stopped
	}
	// The streams are done: retired generations (which open streams may
	// have been using until now) close at once, and the audit events of
	// the last requests are written (their streams emitted them as they
	// ended).
	setDrained()
	s.closeAudit(ctx)
	s.retired.Wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	cur := s.current.Load()
	if err := cur.exec.Close(closeCtx); err != nil {
		s.log.Warn().Err(err).Msg("executor close")
	}
	if err := closeClients(closeCtx, cur.set.clients); err != nil {
		s.log.Warn().Err(err).Msg("plugin client close")
	}
	if err := srv.admin.Shutdown(closeCtx); err != nil {
		s.log.Warn().Err(err).Msg("admin server shutdown")
	}
	if err := srv.attr.close(); err != nil {
		s.log.Warn().Err(err).Msg("attribution store close")
	}
	s.shutdownTracing(ctx)
	s.log.Info().Msg("mcp-extproc stopped")
}

// build makes a generation for cfg, reusing the unchanged clients of prev.
// It returns the clients it created (to Start) and those of prev no longer
// used (to Close once prev is retired).
func (s *sidecar) build(cfg *config.Config, prev *generation) (*generation, []*pluginclient.Client, []*pluginclient.Client, error) {
	ident, err := identity.New(cfg.Extproc.Identity)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("identity: %w", err)
	}
	ruleSet, issues := rules.Compile(cfg.Extproc.Rules, rules.Options{})
	if len(issues) > 0 {
		// Validation compiled them already; this is a config built in code.
		return nil, nil, nil, fmt.Errorf("extproc.rules: %w", issues[0])
	}
	var prevSet *pluginSet
	if prev != nil {
		prevSet = prev.set
	}
	set, created, removed, err := buildPluginSet(cfg, prevSet, s.log.With().Str("component", "pluginclient").Logger(), s.metrics)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("plugin clients: %w", err)
	}
	var plugins executor.Plugins = set
	if s.tracing != nil {
		plugins = &tracedPlugins{pluginSet: set, t: s.tracing}
	}
	exec := executor.New(plugins, executor.Options{
		Settings:    cfg.PluginSettings,
		HookTimeout: cfg.HookTimeout(),
		Logger:      s.log.With().Str("component", "executor").Logger(),
		IsDown:      func(err error) bool { return errors.Is(err, pluginclient.ErrPluginDown) },
		Observer:    s.metrics,
	})
	for _, p := range cfg.Plugins {
		s.metrics.SetPluginState(p.Name, set.State(p.Name))
	}
	pins, err := newPinner(&cfg.Extproc.ToolPinning, s.pins)
	if err != nil {
		return nil, nil, nil, err
	}
	g := &generation{cfg: cfg, set: set, exec: exec, snap: &processor.Snapshot{Settings: &cfg.Extproc, Hooks: exec, Identity: ident, Rules: ruleSet, Pins: pins,
		InProcessOnly: s.tracing == nil && allBuiltin(cfg.Plugins)}}
	return g, created, removed, nil
}

// shutdownTracing flushes and stops span export, if on, within 5 s.
func (s *sidecar) shutdownTracing(ctx context.Context) {
	if s.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := s.tracing.shutdown(ctx); err != nil {
		s.log.Warn().Err(err).Msg("span export shutdown")
	}
}

func adminMux(reg *prometheus.Registry, ready *readiness, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", ready.serveHTTP)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
