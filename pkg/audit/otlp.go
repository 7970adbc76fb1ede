package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
)

// OTLPEventName is the event name of the log records OTLPSink exports.
const OTLPEventName = "mcp_extproc.audit"

// Attributes of the log records OTLPSink exports besides the body. The
// mcp.*, jsonrpc.* and gen_ai.* ones are OpenTelemetry's MCP semantic
// conventions; the others are the sidecar's.
const (
	AttrMCPMethod     = "mcp.method.name"
	AttrMCPSession    = "mcp.session.id"
	AttrJSONRPCID     = "jsonrpc.request.id"
	AttrToolName      = "gen_ai.tool.name"
	AttrUserID        = "user.id"
	AttrClientAddress = "client.address"
	AttrDecision      = "mcp_extproc.decision"
	AttrMode          = "mcp_extproc.mode"
	AttrDecidedByKind = "mcp_extproc.decided_by.kind"
	AttrDecidedByName = "mcp_extproc.decided_by.name"
	AttrTenant        = "mcp_extproc.tenant"
	AttrRequestID     = "mcp_extproc.request_id"
)

// OTLPConfig configures an [OTLPSink].
type OTLPConfig struct {
	// Format is the encoding of each record's body (a string holding the
	// JSON object); "" means FormatJSON.
	Format Format
	// Product names the producer in OCSF bodies and, by its Name and
	// Version, the resource's service.name and service.version.
	Product Product
	// Resource, if set, replaces the resource made from Product.
	Resource *resource.Resource
	// ExporterOptions configure the otlploggrpc exporter (endpoint, TLS,
	// headers), as the sidecar's trace exporter is configured.
	ExporterOptions []otlploggrpc.Option
	// Exporter, if set, is used instead of an otlploggrpc exporter (tests,
	// another transport); ExporterOptions are then ignored.
	Exporter sdklog.Exporter
}

// OTLPSink exports each event as an OpenTelemetry log record over OTLP, to
// the collector traces already go to. The record's body is the encoded
// event; the attributes above let a backend filter without parsing it;
// its trace and span ids are the event's, so the record sits in its
// trace.
//
// Each Write exports its record synchronously, under the Write's context,
// so that a collector that is down or slow makes Write fail or wait, and
// the Logger's queue and drop count see it: nothing is dropped where the
// count cannot see it. The price is one export call per event; the
// Logger's goroutine makes them one at a time.
type OTLPSink struct {
	provider *sdklog.LoggerProvider
	logger   log.Logger
	proc     *syncProcessor
	enc      Encoder
}

// NewOTLPSink returns a sink exporting through cfg's exporter. The
// otlploggrpc exporter connects lazily: an unreachable collector does not
// fail NewOTLPSink, it makes writes fail.
func NewOTLPSink(ctx context.Context, cfg OTLPConfig) (*OTLPSink, error) {
	exp := cfg.Exporter
	if exp == nil {
		e, err := otlploggrpc.New(ctx, cfg.ExporterOptions...)
		if err != nil {
			return nil, fmt.Errorf("audit: otlp log exporter: %w", err)
		}
		exp = e
	}
	p := cfg.Product.withDefaults()
	res := cfg.Resource
	if res == nil {
		var err error
		res, err = resource.Merge(resource.Default(), resource.NewSchemaless(
			attribute.String("service.name", p.Name), attribute.String("service.version", p.Version)))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("audit: otlp resource: %w", err), exp.Shutdown(ctx))
		}
	}
	proc := &syncProcessor{exp: exp}
	provider := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(proc))
	return &OTLPSink{
		provider: provider,
		logger:   provider.Logger("github.com/mcp-extproc/mcp-extproc/pkg/audit"),
		proc:     proc,
		enc:      Encoder{Format: cfg.Format, Product: p},
	}, nil
}

// Write exports e as one log record and returns the export's error.
func (s *OTLPSink) Write(ctx context.Context, e *Event) error {
	line, err := s.enc.Encode(e)
	if err != nil {
		return err
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	var r log.Record
	r.SetEventName(OTLPEventName)
	r.SetTimestamp(e.Time)
	sev, text := otlpSeverity(e)
	r.SetSeverity(sev)
	r.SetSeverityText(text)
	r.SetBody(attribute.StringValue(string(line)))
	r.AddAttributes(otlpAttributes(e)...)
	ctx = withTraceContext(ctx, e.TraceID, e.SpanID)
	s.proc.err = nil
	s.logger.Emit(ctx, r)
	if s.proc.err != nil {
		return fmt.Errorf("audit: otlp export: %w", s.proc.err)
	}
	return nil
}

// Close shuts the provider and the exporter down, bounded by ctx.
func (s *OTLPSink) Close(ctx context.Context) error {
	if err := s.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("audit: otlp shutdown: %w", err)
	}
	return nil
}

// otlpSeverity ranks a decision: an error while deciding is ERROR, a deny
// or would-deny WARN, the rest INFO.
func otlpSeverity(e *Event) (log.Severity, string) {
	switch {
	case e.Error != "":
		return log.SeverityError, "ERROR"
	case e.Decision == DecisionDeny || e.Decision == DecisionWouldDeny:
		return log.SeverityWarn, "WARN"
	}
	return log.SeverityInfo, "INFO"
}

// otlpAttributes are the record's attributes: those of e that are set.
// Strings are bounded as in the body (Encode bounded its own copy).
func otlpAttributes(e *Event) []attribute.KeyValue {
	b := bounded(e)
	kv := make([]attribute.KeyValue, 0, 12)
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, attribute.String(k, v))
		}
	}
	add(AttrMCPMethod, b.Method)
	add(AttrMCPSession, b.SessionID)
	add(AttrJSONRPCID, b.JSONRPCID)
	if b.Method == "tools/call" {
		add(AttrToolName, b.Target)
	}
	add(AttrUserID, b.Caller.Subject)
	add(AttrTenant, b.Caller.Tenant)
	add(AttrClientAddress, b.Caller.Address)
	add(AttrDecision, string(b.Decision))
	add(AttrMode, string(b.Mode))
	add(AttrDecidedByKind, b.DecidedBy.Kind)
	add(AttrDecidedByName, b.DecidedBy.Name)
	add(AttrRequestID, b.RequestID)
	return kv
}

// withTraceContext puts the event's trace and span ids (hex) into ctx, from
// which the SDK sets the record's; ids that do not parse are left out.
func withTraceContext(ctx context.Context, traceID, spanID string) context.Context {
	var cfg trace.SpanContextConfig
	if len(traceID) != 2*len(cfg.TraceID) || len(spanID) != 2*len(cfg.SpanID) {
		return ctx
	}
	if _, err := hex.Decode(cfg.TraceID[:], []byte(traceID)); err != nil {
		return ctx
	}
	if _, err := hex.Decode(cfg.SpanID[:], []byte(spanID)); err != nil {
		return ctx
	}
	sc := trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// syncProcessor exports each record as it is emitted and keeps the error
// for the OTLPSink that emitted it. The SDK asks processors not to block
// in OnEmit; this one blocks on purpose, on the Logger's goroutine, so the
// export's failure reaches the drop count (a batching processor would drop
// where no one counts). Only the OTLPSink's one goroutine emits, so err
// needs no lock.
type syncProcessor struct {
	exp sdklog.Exporter
	err error
}

func (p *syncProcessor) OnEmit(ctx context.Context, r *sdklog.Record) error {
	p.err = p.exp.Export(ctx, []sdklog.Record{r.Clone()})
	return nil // the error is the sink's to report, not otel.Handle's
}

func (p *syncProcessor) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (p *syncProcessor) Shutdown(ctx context.Context) error { return p.exp.Shutdown(ctx) }

func (p *syncProcessor) ForceFlush(ctx context.Context) error { return p.exp.ForceFlush(ctx) }
