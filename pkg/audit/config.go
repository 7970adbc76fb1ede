package audit

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
)

// The sink kinds of [Config.Sink].
const (
	SinkStdout = "stdout"
	SinkFile   = "file"
	SinkOTLP   = "otlp"
)

// Config is what the configuration's extproc.audit section says, in the
// shape docs/audit.md proposes; the configuration package parses and
// validates the YAML and hands this over.
type Config struct {
	// Sink is SinkStdout (the default), SinkFile or SinkOTLP.
	Sink string
	// Path is the file SinkFile appends to.
	Path string
	// Format is the line's encoding; "" means FormatJSON.
	Format Format
	// QueueSize is Options.QueueSize; 0 means DefaultQueueSize.
	QueueSize int
	// WriteTimeout is Options.WriteTimeout; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// OTLPEndpoint is the collector's host:port for SinkOTLP, and
	// OTLPInsecure whether to connect without TLS, as for traces.
	OTLPEndpoint string
	OTLPInsecure bool
	// Stdout is where SinkStdout writes; nil means os.Stdout.
	Stdout io.Writer
}

// Open makes the sink cfg names and returns a started Logger writing to
// it. p names the producer (OCSF metadata.product, the OTLP resource);
// opts supplies the hooks (OnDrop, OnError), and cfg's QueueSize and
// WriteTimeout override its.
//
// Which messages are audited (extproc.audit.include) is the caller's
// choice and not part of Config: the caller does not Emit what it leaves
// out.
func Open(ctx context.Context, cfg Config, p Product, opts Options) (*Logger, error) {
	if _, err := ParseFormat(string(cfg.Format)); err != nil {
		return nil, err
	}
	var sink Sink
	switch cfg.Sink {
	case "", SinkStdout:
		w := cfg.Stdout
		if w == nil {
			w = os.Stdout
		}
		sink = NewWriterSink(w, cfg.Format, p)
	case SinkFile:
		if cfg.Path == "" {
			return nil, fmt.Errorf("audit: sink file needs a path")
		}
		s, err := OpenFile(cfg.Path, cfg.Format, p)
		if err != nil {
			return nil, err
		}
		sink = s
	case SinkOTLP:
		if cfg.OTLPEndpoint == "" {
			return nil, fmt.Errorf("audit: sink otlp needs an endpoint")
		}
		eo := []otlploggrpc.Option{otlploggrpc.WithEndpoint(cfg.OTLPEndpoint)}
		if cfg.OTLPInsecure {
			eo = append(eo, otlploggrpc.WithInsecure())
		}
		s, err := NewOTLPSink(ctx, OTLPConfig{Format: cfg.Format, Product: p, ExporterOptions: eo})
		if err != nil {
			return nil, err
		}
		sink = s
	default:
		return nil, fmt.Errorf("audit: unknown sink %q (want stdout, file or otlp)", cfg.Sink)
	}
	if cfg.QueueSize > 0 {
		opts.QueueSize = cfg.QueueSize
	}
	if cfg.WriteTimeout > 0 {
		opts.WriteTimeout = cfg.WriteTimeout
	}
	l := NewLogger(sink, opts)
	l.Start()
	return l, nil
}
