package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
)

// Format is an encoding of events.
type Format string

// The formats.
const (
	// FormatJSON is the native event, one JSON object per line, with the
	// [Event] field names.
	FormatJSON Format = "json"
	// FormatOCSF is the event as an OCSF API Activity (class 6003), one
	// JSON object per line (docs/audit.md has the mapping).
	FormatOCSF Format = "ocsf"
)

// ParseFormat returns the Format named s ("json" or "ocsf"; "" means
// json).
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatJSON:
		return FormatJSON, nil
	case FormatOCSF:
		return FormatOCSF, nil
	}
	return "", fmt.Errorf("audit: unknown format %q (want json or ocsf)", s)
}

// Product is what the OCSF encoding names as the event's producer
// (metadata.product).
type Product struct {
	Name       string // "mcp-extproc"
	VendorName string // who ships it
	Version    string // the build's version
}

// The producer OCSF events name for a Product field left empty; the
// caller should at least set Version from its build.
const (
	DefaultProductName    = "mcp-extproc"
	DefaultProductVendor  = "mcp-extproc"
	DefaultProductVersion = "unknown"
)

// withDefaults returns p with its empty fields set to the defaults.
func (p Product) withDefaults() Product {
	if p.Name == "" {
		p.Name = DefaultProductName
	}
	if p.VendorName == "" {
		p.VendorName = DefaultProductVendor
	}
	if p.Version == "" {
		p.Version = DefaultProductVersion
	}
	return p
}

// Encoder turns events into lines. It keeps a buffer between calls, so one
// Encoder must not be used by two goroutines at once; the zero value
// encodes FormatJSON.
type Encoder struct {
	// Format is the encoding; "" means FormatJSON.
	Format Format
	// Product is the producer for FormatOCSF; empty fields take the
	// Default* values.
	Product Product

	buf bytes.Buffer
	enc *json.Encoder
}

// Encode returns e encoded as one line, ending in '\n'. The slice is valid
// until the next call.
func (c *Encoder) Encode(e *Event) ([]byte, error) {
	if c.enc == nil {
		c.enc = json.NewEncoder(&c.buf)
		c.enc.SetEscapeHTML(false)
	}
	c.buf.Reset()
	b := bounded(e)
	var v any = &b
	if c.Format == FormatOCSF {
		v = toOCSF(&b, c.Product.withDefaults())
	} else if c.Format != FormatJSON && c.Format != "" {
		return nil, fmt.Errorf("audit: unknown format %q", c.Format)
	}
	// json.Encoder ends the value with '\n'.
	if err := c.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("audit: encode %s event: %w", c.formatName(), err)
	}
	return c.buf.Bytes(), nil
}

func (c *Encoder) formatName() Format {
	if c.Format == "" {
		return FormatJSON
	}
	return c.Format
}

// bounded returns a copy of e whose strings from outside the sidecar (a
// client, a server, a plugin) are at most logsafe.DefaultCap bytes, cut
// visibly, so no message can make an audit line unbounded. Content is the
// caller's and is kept as is; Plugins and Rules name configured things,
// except the verdicts and outcomes, which are short words.
//
// A zero Time, which no Logger passes on, is set to now: every encoding
// has a time.
func bounded(e *Event) Event {
	b := *e
	if b.Time.IsZero() {
		b.Time = time.Now()
	}
	for _, s := range []*string{&b.RequestID, &b.JSONRPCID, &b.SessionID, &b.TraceID, &b.SpanID,
		&b.Server, &b.Method, &b.Target, &b.Error, &b.Violation.Code, &b.Violation.Reason,
		&b.Caller.Subject, &b.Caller.Name, &b.Caller.Tenant, &b.Caller.Address} {
		*s = logsafe.Cap(*s, logsafe.DefaultCap)
	}
	return b
}
