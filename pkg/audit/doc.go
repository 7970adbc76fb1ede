// Package audit records what the sidecar decided about each MCP message, for
// a security team to audit and trace: who called what, which plugin or rule
// decided, why, and how long it took.
//
// An [Event] is one decided message. The processor fills one per decision
// and hands it to a [Logger], whose [Logger.Emit] never blocks and never
// fails the request: events go through a bounded queue to one goroutine the
// Logger owns, which encodes them ([Encoder]: native JSON lines or the OCSF
// API Activity class) and writes them to a [Sink] (a file or stdout
// [WriterSink], or OTLP logs [OTLPSink]). When the queue is full the event
// is dropped and counted; the caller's [Options.OnDrop] hook turns the count
// into a metric to alert on.
//
// Events carry no message content by default: arguments and results are
// recorded as hashes ([Hash]). Content is recorded only when the caller
// fills [Event.Content], which it does only when configured to, and only
// with what it has already redacted: this package writes what it is given.
//
// docs/audit.md describes the fields, the OCSF mapping and the sinks.
package audit
