package sidecar

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// TestProcessorOptionsOff: with audit and tracing off, the processor gets
// no Auditor and no Tracer (not a nil *audit.Logger in a non-nil
// interface, which would turn its audit trail on for every request).
func TestProcessorOptionsOff(t *testing.T) {
	s := &sidecar{log: zerolog.Nop()}
	if opts := s.processorOptions(nil); opts.Audit != nil || opts.Tracer != nil {
		t.Errorf("audit and tracing off: Audit %#v, Tracer %#v; want both nil", opts.Audit, opts.Tracer)
	}
	s.audit = audit.NewLogger(nil, audit.Options{})
	if opts := s.processorOptions(nil); opts.Audit == nil {
		t.Error("audit on: no Auditor")
	}
}

// TestAuditConfig: the OTLP endpoint defaults to the sidecar's, TLS
// follows --otlp-insecure, and the rest is the section's.
func TestAuditConfig(t *testing.T) {
	cfg := &config.Audit{Sink: audit.SinkOTLP, Format: "ocsf", QueueSize: 7, WriteTimeout: config.NewSeconds(3e9)}
	got := auditConfig(cfg, "collector:4317", true)
	want := audit.Config{Sink: audit.SinkOTLP, Format: audit.FormatOCSF, QueueSize: 7, WriteTimeout: 3e9, OTLPEndpoint: "collector:4317", OTLPInsecure: true}
	if got != want {
		t.Errorf("auditConfig = %+v, want %+v", got, want)
	}
	cfg.OTLPEndpoint = "audit:4317"
	if got := auditConfig(cfg, "collector:4317", false); got.OTLPEndpoint != "audit:4317" || got.OTLPInsecure {
		t.Errorf("auditConfig with its own endpoint = %+v, want audit:4317 over TLS", got)
	}
}

// TestAuditChanged: include applies at once; anything else needs a
// restart.
func TestAuditChanged(t *testing.T) {
	base := func() *config.Config {
		c := &config.Config{}
		c.Extproc.Audit = config.Audit{Enabled: true, Sink: "file", Path: "/a", WriteTimeout: config.NewSeconds(5e9)}
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(*config.Audit)
		want   bool
	}{
		{"nothing", func(*config.Audit) {}, false},
		{"include.lists", func(a *config.Audit) { a.Include.Lists = true }, false},
		{"the same write_timeout, another pointer", func(a *config.Audit) { a.WriteTimeout = config.NewSeconds(5e9) }, false},
		{"enabled", func(a *config.Audit) { a.Enabled = false }, true},
		{"path", func(a *config.Audit) { a.Path = "/b" }, true},
		{"format", func(a *config.Audit) { a.Format = "ocsf" }, true},
		{"write_timeout", func(a *config.Audit) { a.WriteTimeout = config.NewSeconds(1e9) }, true},
	} {
		next := base()
		tc.change(&next.Extproc.Audit)
		if got := auditChanged(base(), next); got != tc.want {
			t.Errorf("%s: auditChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
