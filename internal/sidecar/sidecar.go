// Package sidecar wires mcp-extproc together: configuration, the plugin pool,
// the executor, the ext_proc gRPC server with health, and the admin HTTP
// server. cmd/extproc parses flags and calls Run; tests and the demo run the
// same code in-process.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// Options configure a sidecar.
type Options struct {
	Config     *config.Config
	ConfigPath string // for reload; may be empty
	GRPCAddr   string
	AdminAddr  string
	Logger     zerolog.Logger
	// GracePeriod bounds how long open streams may run after a shutdown
	// signal. Default 10 s.
	GracePeriod time.Duration
	// ReadyCheckInterval is how often plugin states are read into the health
	// status. Default 500 ms.
	ReadyCheckInterval time.Duration
	// Started, if set, receives the bound addresses once both servers listen.
	Started func(grpcAddr, adminAddr net.Addr)
}

// ExtProcService is the gRPC service name reported by the health service.
const ExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor"

// Run runs the sidecar until ctx is done, then drains and returns nil, or
// returns the error that stopped it.
func Run(ctx context.Context, opts Options) error {
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 10 * time.Second
	}
	if opts.ReadyCheckInterval == 0 {
		opts.ReadyCheckInterval = 500 * time.Millisecond
	}
	log := opts.Logger
	cfg := opts.Config

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	pool, err := pluginclient.NewPool(cfg.Plugins, cfg.PluginSettings, pluginclient.Options{
		Logger:              log.With().Str("component", "pluginclient").Logger(),
		HealthCheckInterval: cfg.PluginSettings.HealthCheckInterval(),
		PluginTimeout:       cfg.PluginSettings.Timeout(),
	})
	if err != nil {
		return fmt.Errorf("plugin pool: %w", err)
	}
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPool()
	pool.Start(poolCtx)

	exec := executor.New(pool, executor.Options{
		Settings:    cfg.PluginSettings,
		HookTimeout: cfg.Extproc.HookTimeout.Duration,
		Logger:      log.With().Str("component", "executor").Logger(),
		IsDown:      func(err error) bool { return errors.Is(err, pluginclient.ErrPluginDown) },
	})
	var snap atomic.Pointer[processor.Snapshot]
	snap.Store(&processor.Snapshot{Settings: &cfg.Extproc, Hooks: exec})
	proc := processor.New(processor.Options{
		Logger:   log.With().Str("component", "processor").Logger(),
		Snapshot: snap.Load,
	})

	grpcLis, err := net.Listen("tcp", opts.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen grpc %s: %w", opts.GRPCAddr, err)
	}
	adminLis, err := net.Listen("tcp", opts.AdminAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("listen admin %s: %w", opts.AdminAddr, err)
	}

	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, proc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	ready := newReadiness(cfg, pool)
	setHealth := func(serving bool) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if serving {
			st = healthpb.HealthCheckResponse_SERVING
		}
		hs.SetServingStatus("", st)
		hs.SetServingStatus(ExtProcService, st)
	}
	setHealth(ready.check())

	admin := &http.Server{Handler: adminMux(reg, ready), ReadHeaderTimeout: 5 * time.Second}
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
	log.Info().Str("grpc_addr", grpcLis.Addr().String()).Str("admin_addr", adminLis.Addr().String()).
		Int("plugins", len(cfg.Plugins)).Msg("mcp-extproc started")

	ticker := time.NewTicker(opts.ReadyCheckInterval)
	defer ticker.Stop()
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
		}
	}

	// Drain: report NOT_SERVING, refuse new streams, let open ones finish
	// within the grace period, then close plugin sessions.
	log.Info().Dur("grace_period", opts.GracePeriod).Msg("shutting down: draining streams")
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
		log.Warn().Int64("open_streams", proc.OpenStreams()).Msg("grace period over: closing open streams")
		gs.Stop()
		<-stopped
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := exec.Close(closeCtx); err != nil {
		log.Warn().Err(err).Msg("executor close")
	}
	if err := pool.Close(closeCtx); err != nil {
		log.Warn().Err(err).Msg("plugin pool close")
	}
	stopPool()
	if err := admin.Shutdown(closeCtx); err != nil {
		log.Warn().Err(err).Msg("admin server shutdown")
	}
	log.Info().Msg("mcp-extproc stopped")
	return runErr
}

func adminMux(reg *prometheus.Registry, ready *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", ready.serveHTTP)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
