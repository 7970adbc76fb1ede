package audit

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/grpc"
)

// memExporter keeps what it is given; err, if set, fails every export.
type memExporter struct {
	mu      sync.Mutex
	records []sdklog.Record
	err     error
	down    bool
}

func (m *memExporter) Export(_ context.Context, rs []sdklog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	for _, r := range rs {
		m.records = append(m.records, r.Clone())
	}
	return nil
}
func (m *memExporter) Shutdown(context.Context) error {
	m.mu.Lock()
	m.down = true
	m.mu.Unlock()
	return nil
}
func (m *memExporter) ForceFlush(context.Context) error { return nil }

func TestOTLPSinkRecord(t *testing.T) {
	exp := &memExporter{}
	s, err := NewOTLPSink(t.Context(), OTLPConfig{Format: FormatOCSF, Exporter: exp, Product: Product{Version: "v1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	e := fullEvent()
	if err := s.Write(t.Context(), &e); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !exp.down || len(exp.records) != 1 {
		t.Fatalf("exporter shut down %v, %d records; want true, 1", exp.down, len(exp.records))
	}
	r := exp.records[0]
	if r.EventName() != OTLPEventName || !r.Timestamp().Equal(e.Time) || r.Severity() != log.SeverityWarn {
		t.Errorf("event %q at %v severity %v", r.EventName(), r.Timestamp(), r.Severity())
	}
	if got := r.TraceID().String(); got != e.TraceID {
		t.Errorf("trace id %s, want %s", got, e.TraceID)
	}
	if got := r.SpanID().String(); got != e.SpanID {
		t.Errorf("span id %s, want %s", got, e.SpanID)
	}
	body := r.Body().AsString()
	if err := validateOCSF([]byte(body)); err != nil {
		t.Errorf("body is not a valid OCSF event: %v\n%s", err, body)
	}
	attrs := map[string]string{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool { attrs[string(kv.Key)] = kv.Value.AsString(); return true })
	for k, want := range map[string]string{
		AttrMCPMethod: "tools/call", AttrMCPSession: "sess-1", AttrJSONRPCID: "7", AttrToolName: "delete_repo",
		AttrUserID: "alice", AttrTenant: "acme", AttrDecision: "deny", AttrMode: "enforce",
		AttrDecidedByKind: "rule", AttrDecidedByName: "no-deletes", AttrRequestID: "9f1c-req",
		AttrClientAddress: "10.0.0.7:51234",
	} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], want)
		}
	}
	res := map[string]string{}
	for _, kv := range r.Resource().Attributes() {
		res[string(kv.Key)] = kv.Value.AsString()
	}
	if res["service.name"] != "mcp-extproc" || res["service.version"] != "v1.2.3" {
		t.Errorf("resource %v", res)
	}
}

// An export that fails makes Write fail, so the Logger counts the drop.
func TestOTLPSinkExportError(t *testing.T) {
	exp := &memExporter{err: errDown}
	s, err := NewOTLPSink(t.Context(), OTLPConfig{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	var drops dropCounter
	l := NewLogger(s, Options{OnDrop: drops.onDrop})
	l.Start()
	for range 3 {
		l.Emit(fullEvent())
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if drops.get(DropSinkError) != 3 {
		t.Errorf("sink_error drops %d, want 3", drops.get(DropSinkError))
	}
	// A native-format body and an allow decide the severity and body.
	exp.err = nil
	s2, err := NewOTLPSink(t.Context(), OTLPConfig{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	e := Event{Time: time.Now(), Method: "tools/list", Decision: DecisionAllow, Mode: ModeEnforce}
	if err := s2.Write(t.Context(), &e); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := exp.records[len(exp.records)-1]
	var back Event
	if err := json.Unmarshal([]byte(r.Body().AsString()), &back); err != nil || back.Method != "tools/list" {
		t.Errorf("body %q: %v", r.Body().AsString(), err)
	}
	if r.Severity() != log.SeverityInfo || r.TraceID().IsValid() {
		t.Errorf("severity %v, trace %v", r.Severity(), r.TraceID())
	}
}

// collector is a fake OTLP logs collector.
type collector struct {
	collogs.UnimplementedLogsServiceServer
	got chan *collogs.ExportLogsServiceRequest
}

func (c *collector) Export(_ context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	c.got <- req
	return &collogs.ExportLogsServiceResponse{}, nil
}

// End to end through the real otlploggrpc exporter: the collector receives
// the record; and with no collector listening, writes fail by the write
// timeout and are counted, while Emit stays immediate.
func TestOTLPSinkGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{got: make(chan *collogs.ExportLogsServiceRequest, 4)}
	gs := grpc.NewServer()
	collogs.RegisterLogsServiceServer(gs, col)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	s, err := NewOTLPSink(t.Context(), OTLPConfig{ExporterOptions: []otlploggrpc.Option{
		otlploggrpc.WithEndpoint(lis.Addr().String()), otlploggrpc.WithInsecure()}})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLogger(s, Options{WriteTimeout: 5 * time.Second})
	l.Start()
	l.Emit(fullEvent())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-col.got:
		lr := req.GetResourceLogs()[0].GetScopeLogs()[0].GetLogRecords()[0]
		if lr.GetEventName() != OTLPEventName {
			t.Errorf("event name %q", lr.GetEventName())
		}
		var back Event
		if err := json.Unmarshal([]byte(lr.GetBody().GetStringValue()), &back); err != nil || back.Target != "delete_repo" {
			t.Errorf("body %q: %v", lr.GetBody().GetStringValue(), err)
		}
	default:
		t.Fatal("collector received nothing")
	}
	if l.Written() != 1 {
		t.Errorf("written %d, want 1", l.Written())
	}

	// Nobody listening.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	_ = dead.Close()
	s, err = NewOTLPSink(t.Context(), OTLPConfig{ExporterOptions: []otlploggrpc.Option{
		otlploggrpc.WithEndpoint(addr), otlploggrpc.WithInsecure()}})
	if err != nil {
		t.Fatalf("NewOTLPSink with no collector: %v", err)
	}
	var drops dropCounter
	l = NewLogger(s, Options{QueueSize: 2, WriteTimeout: 100 * time.Millisecond, OnDrop: drops.onDrop})
	l.Start()
	for range 50 {
		l.Emit(fullEvent())
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Written() != 0 || l.Dropped() != 50 || drops.get(DropSinkError) == 0 {
		t.Errorf("written %d, dropped %d (sink_error %d); want 0, 50, some", l.Written(), l.Dropped(), drops.get(DropSinkError))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("Close used up its deadline")
	}
}
