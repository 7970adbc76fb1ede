// Package sidecar wires mcp-extproc together: configuration and its hot
// reload, the plugin pools, the executor, the ext_proc gRPC server with
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

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
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

// sidecar is the running state Run owns.
type sidecar struct {
	opts    Options
	log     zerolog.Logger
	metrics *metrics.Metrics
	current atomic.Pointer[generation]
	// retired holds work that outlives a reload: closing the executor and
	// the pools of a replaced generation once its streams are done.
	retired sync.WaitGroup
	// drained is done once Run has stopped and its open streams have ended:
	// retired generations may then close at once.
	drained context.Context
	// tracing is nil unless Options.OTLPEndpoint is set.
	tracing *tracing
}

// Run runs the sidecar until ctx is done, then drains and returns nil, or
// returns the error that stopped it.
func Run(ctx context.Context, opts Options) error {
	if opts.Config == nil {
		return errors.New("sidecar: Options.Config is required")
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 10 * time.Second
	}
	if opts.ReadyCheckInterval == 0 {
		opts.ReadyCheckInterval = 500 * time.Millisecond
	}
	if opts.ReloadInterval == 0 {
		opts.ReloadInterval = 2 * time.Second
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	drained, setDrained := context.WithCancel(context.WithoutCancel(ctx))
	defer setDrained()
	s := &sidecar{opts: opts, log: opts.Logger, metrics: metrics.New(reg), drained: drained}

	// Listen before connecting to plugins, so that an address in use stops
	// Run with nothing to clean up.
	grpcLis, err := net.Listen("tcp", opts.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen grpc %s: %w", opts.GRPCAddr, err)
	}
	adminLis, err := net.Listen("tcp", opts.AdminAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("listen admin %s: %w", opts.AdminAddr, err)
	}
	withHeaders := pluginclient.WithHeaders
	if opts.OTLPEndpoint != "" {
		if s.tracing, err = newTracing(ctx, opts.OTLPEndpoint, opts.OTLPInsecure); err != nil {
			grpcLis.Close()
			adminLis.Close()
			return err
		}
		withHeaders = s.tracing.withHeaders
	}
	gen, created, _, err := s.build(opts.Config, nil)
	if err != nil {
		grpcLis.Close()
		adminLis.Close()
		s.shutdownTracing(ctx)
		return err
	}
	poolCtx, stopPools := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPools()
	for _, p := range created {
		p.Start(poolCtx)
	}
	s.current.Store(gen)
	s.metrics.ConfigApplied(time.Now())

	proc := processor.New(processor.Options{
		Logger:   s.log.With().Str("component", "processor").Logger(),
		Snapshot: func() *processor.Snapshot { return s.current.Load().snap },
		Observer: s.metrics,
		// The request's trace context and x-request-id follow each tool
		// call into its plugins.
		WithHeaders: withHeaders,
		LogBodies:   opts.LogBodies,
	})

	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, proc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	ready := &readiness{current: func() *generation { return s.current.Load() }, started: map[string]bool{}}
	setHealth := func(serving bool) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if serving {
			st = healthpb.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus("", st)
		hs.SetServingStatus(ExtProcService, st)
	}
	setHealth(ready.check())

	admin := &http.Server{Handler: adminMux(reg, ready, opts.Pprof), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(grpcLis) }()
	go func() {
		if err := admin.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	if opts.Started != nil {
		opts.Started(grpcLis.Addr(), adminLis.Addr())
	}
	s.log.Info().Str("grpc_addr", grpcLis.Addr().String()).Str("admin_addr", adminLis.Addr().String()).
		Int("plugins", len(opts.Config.Plugins)).Msg("mcp-extproc started")

	w := newWatcher(opts.ConfigPath)
	ticker := time.NewTicker(opts.ReadyCheckInterval)
	defer ticker.Stop()
	var reloadTick <-chan time.Time
	if opts.ConfigPath != "" && opts.ReloadInterval > 0 {
		rt := time.NewTicker(opts.ReloadInterval)
		defer rt.Stop()
		reloadTick = rt.C
	}
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			runErr = fmt.Errorf("server stopped: %w", err)
			break loop
		case <-ticker.C:
			if !ready.draining.Load() {
				setHealth(ready.check())
			}
		case <-reloadTick:
			if w.changed() {
				s.reload(poolCtx, w)
			}
		case <-opts.Reload:
			w.changed() // take in the current content
			s.reload(poolCtx, w)
		}
	}

	// Drain: report NOT_SERVING, refuse new streams, let open ones finish
	// within the grace period, then close plugin sessions.
	s.log.Info().Dur("grace_period", opts.GracePeriod).Msg("shutting down: draining streams")
	ready.draining.Store(true)
	hs.Shutdown()
	proc.Drain()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	grace := time.NewTimer(opts.GracePeriod)
	select {
	case <-stopped:
		grace.Stop()
	case <-grace.C:
		s.log.Warn().Int64("open_streams", proc.OpenStreams()).Msg("grace period over: closing open streams")
		gs.Stop()
		<-stopped
	}
	// The streams are done: retired generations (which open streams may
	// have been using until now) close at once.
	setDrained()
	s.retired.Wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cur := s.current.Load()
	if err := cur.exec.Close(closeCtx); err != nil {
		s.log.Warn().Err(err).Msg("executor close")
	}
	if err := closePools(closeCtx, cur.set.allPools()); err != nil {
		s.log.Warn().Err(err).Msg("plugin pool close")
	}
	stopPools()
	if err := admin.Shutdown(closeCtx); err != nil {
		s.log.Warn().Err(err).Msg("admin server shutdown")
	}
	s.shutdownTracing(ctx)
	s.log.Info().Msg("mcp-extproc stopped")
	return runErr
}

// build makes a generation for cfg, reusing the unchanged pools of prev.
func (s *sidecar) build(cfg *config.Config, prev *generation) (*generation, []*pluginclient.Pool, []*pluginclient.Pool, error) {
	var prevSet *pluginSet
	if prev != nil {
		prevSet = prev.set
	}
	set, created, removed, err := buildPluginSet(cfg, prevSet, s.log.With().Str("component", "pluginclient").Logger(), s.metrics)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("plugin pool: %w", err)
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
	g := &generation{cfg: cfg, set: set, exec: exec, snap: &processor.Snapshot{Settings: &cfg.Extproc, Hooks: exec}}
	return g, created, removed, nil
}

// shutdownTracing flushes and stops span export, if on, within 5 s.
func (s *sidecar) shutdownTracing(ctx context.Context) {
	if s.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
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
