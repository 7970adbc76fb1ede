package config

import (
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
)

// Audit is extproc.audit: one audit event per decided MCP message, written
// by a sink that never delays a request (docs/audit.md).
type Audit struct {
	// Enabled turns the audit events on.
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty" default:"false"`
	// Sink is "stdout" (default), "file" or "otlp" (OTLP logs to
	// OTLPEndpoint, the collector traces use by default).
	Sink string `yaml:"sink,omitempty" json:"sink,omitempty" default:"stdout"`
	// Path is the file the file sink appends to.
	Path string `yaml:"path,omitempty" json:"path,omitempty" default:"none; required with sink file"`
	// Format is "json" (default: the native event, one per line) or
	// "ocsf" (OCSF API Activity, class 6003).
	Format string `yaml:"format,omitempty" json:"format,omitempty" default:"json"`
	// QueueSize bounds the events waiting for the sink; more are dropped
	// and counted (mcp_extproc_audit_dropped_total).
	QueueSize int `yaml:"queue_size,omitempty" json:"queue_size,omitempty" default:"0: 1024"`
	// WriteTimeout bounds one write of the sink.
	WriteTimeout *Seconds `yaml:"write_timeout,omitempty" json:"write_timeout,omitempty" default:"5"`
	// OTLPEndpoint is the collector's host:port for the otlp sink; empty
	// means the sidecar's --otlp-endpoint.
	OTLPEndpoint string `yaml:"otlp_endpoint,omitempty" json:"otlp_endpoint,omitempty" default:"the sidecar's --otlp-endpoint"`
	// Include says which messages and what of them are audited.
	Include AuditInclude `yaml:"include,omitempty" json:"include,omitempty" default:"calls, no content"`
}

// AuditInclude is extproc.audit.include.
type AuditInclude struct {
	// Lists audits list requests (tools/list, ...) too; off by default:
	// they are frequent and decide little.
	Lists bool `yaml:"lists,omitempty" json:"lists,omitempty" default:"false"`
}

// choices lists the section's one-of-a-few-words settings.
func (a *Audit) choices(at string) []choice {
	return []choice{
		{joinPath(at, "sink"), &a.Sink, []string{audit.SinkStdout, audit.SinkFile, audit.SinkOTLP}},
		{joinPath(at, "format"), &a.Format, []string{string(audit.FormatJSON), string(audit.FormatOCSF)}},
	}
}

// setDefaults sets sink (stdout) and format (json).
func (a *Audit) setDefaults(*Config) {
	for _, ch := range a.choices("") {
		ch.setDefault()
	}
}

// check checks extproc.audit (after defaults).
func (a *Audit) check(v *validator, _ *Config, at string) {
	v.choices(a.choices(at)...)
	if a.QueueSize < 0 {
		v.problem("", joinPath(at, "queue_size"), "must not be negative")
	}
	if a.WriteTimeout != nil && a.WriteTimeout.Duration <= 0 {
		v.problem("", joinPath(at, "write_timeout"), "must be positive")
	}
	if a.Enabled && a.Sink == audit.SinkFile && a.Path == "" {
		v.problem("", joinPath(at, "path"), "required with sink: file")
	}
}

// setDefaults has nothing to set.
func (*AuditInclude) setDefaults(*Config) {}

// check has nothing to check.
func (*AuditInclude) check(*validator, *Config, string) {}
