package sidecar

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// auditErrorInterval is how often at most a failing audit sink is logged:
// a sink that is down fails every event, and the drop counter already
// counts each one.
const auditErrorInterval = 10 * time.Second

// openAudit opens the audit logger of extproc.audit, started, or returns
// nil when the section is off. The OTLP sink's endpoint defaults to the
// sidecar's --otlp-endpoint, and it connects with or without TLS as the
// span exporter does (--otlp-insecure). Dropped events are counted in
// mcp_extproc_audit_dropped_total; sink errors are logged at most once per
// auditErrorInterval.
func (s *sidecar) openAudit(ctx context.Context, cfg *config.Audit) (*audit.Logger, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	ac := auditConfig(cfg, s.opts.OTLPEndpoint, s.opts.OTLPInsecure)
	if ac.Sink == audit.SinkOTLP && ac.OTLPEndpoint == "" {
		return nil, fmt.Errorf("extproc.audit: sink otlp needs extproc.audit.otlp_endpoint or --otlp-endpoint")
	}
	log := s.log.With().Str("component", "audit").Logger()
	errs := &errorLimiter{log: log, every: auditErrorInterval}
	product := audit.Product{Name: ServiceName, Version: buildinfo.Version()}
	l, err := audit.Open(ctx, ac, product, audit.Options{OnDrop: s.metrics.AuditDropped, OnError: errs.report})
	if err != nil {
		return nil, fmt.Errorf("extproc.audit: %w", err)
	}
	where := ac.Path
	if ac.Sink == audit.SinkOTLP {
		where = ac.OTLPEndpoint
	}
	log.Info().Str("sink", ac.Sink).Str("to", where).Str("format", string(ac.Format)).Msg("audit events on")
	return l, nil
}

// auditConfig is what audit.Open needs of extproc.audit.
func auditConfig(cfg *config.Audit, otlpEndpoint string, otlpInsecure bool) audit.Config {
	ac := audit.Config{
		Sink:         cfg.Sink,
		Path:         cfg.Path,
		Format:       audit.Format(cfg.Format),
		QueueSize:    cfg.QueueSize,
		OTLPEndpoint: cfg.OTLPEndpoint,
		OTLPInsecure: otlpInsecure,
	}
	if cfg.WriteTimeout != nil {
		ac.WriteTimeout = cfg.WriteTimeout.Duration
	}
	if ac.OTLPEndpoint == "" {
		ac.OTLPEndpoint = otlpEndpoint
	}
	return ac
}

// closeAudit writes what the audit logger still holds and closes its sink,
// within closeTimeout. It runs once the streams are done, so that the
// events of the last requests go out; what cannot be written by then is
// dropped and counted (reason shutdown).
func (s *sidecar) closeAudit(ctx context.Context) {
	if s.audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := s.audit.Close(ctx); err != nil {
		s.log.Warn().Err(err).Uint64("written", s.audit.Written()).Uint64("dropped", s.audit.Dropped()).Msg("audit close")
		return
	}
	s.log.Info().Uint64("written", s.audit.Written()).Uint64("dropped", s.audit.Dropped()).Msg("audit events closed")
}

// auditChanged reports whether a reload changed what the audit logger was
// opened with: extproc.audit apart from include, which the processor reads
// from each configuration and so applies at once.
func auditChanged(prev, next *config.Config) bool {
	a, b := prev.Extproc.Audit, next.Extproc.Audit
	a.Include, b.Include = config.AuditInclude{}, config.AuditInclude{}
	return !reflect.DeepEqual(a, b)
}

// errorLimiter logs the errors of a sink at most once per interval, with
// the number left out since the last line.
type errorLimiter struct {
	log   zerolog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int
}

// report is audit.Options.OnError.
func (e *errorLimiter) report(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < e.every {
		e.skipped++
		return
	}
	e.log.Warn().Err(err).Int("errors_not_logged", e.skipped).Msg("audit sink failed: event dropped (mcp_extproc_audit_dropped_total{reason=\"sink_error\"})")
	e.last, e.skipped = now, 0
}
