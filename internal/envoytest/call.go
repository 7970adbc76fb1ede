package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// call sends m and waits for its reply. It returns the reply when it carries
// the wanted oneof; (nil, nil) when the message goes unprocessed (processing
// already complete, observability mode, the server closed the stream, or
// failure_mode_allow swallowed an error); an error when the exchange ends here.
func (x *exchange) call(ctx context.Context, m *extprocv3.ProcessingRequest, want phase) (*extprocv3.ProcessingResponse, error) {
	if sent, err := x.post(ctx, m); !sent || err != nil {
		return nil, err
	}
	if x.f.ObservabilityMode {
		return nil, nil // no reply expected; any reply is dropped at the end
	}
	r, err := x.await(ctx, want, x.timed())
	if r == nil || err != nil {
		return nil, err
	}
	return x.accept(r, want)
}

// post sends m, opening the stream on the first message. sent is false when
// processing is complete or the stream could not be opened.
func (x *exchange) post(ctx context.Context, m *extprocv3.ProcessingRequest) (sent bool, err error) {
	if x.done {
		return false, nil
	}
	if x.st == nil {
		st, err := openStream(ctx, x.client)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, x.failure(&localError{kind: LocalGRPCError, status: http.StatusInternalServerError,
				details: err.Error(), failOpen: true})
		}
		x.st = st
		x.res.StreamOpened = true
		m.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  x.cfg.GetRequestBodyMode(),
			ResponseBodyMode: x.cfg.GetResponseBodyMode(),
		}
	}
	m.ObservabilityMode = x.f.ObservabilityMode
	x.env.add(&x.f.Forwarding, m)
	x.res.Sent = append(x.res.Sent, m)
	// A send error means the stream ended; the receiver reports how.
	x.st.send(m)
	return true, nil
}

// timed reports whether replies run under the message timer: not when the
// filter is configured with FULL_DUPLEX_STREAMED, which has none.
func (x *exchange) timed() bool { return !x.duplexConfigured() }

// await reads the next reply, applying override_message_timeout. It returns
// (nil, nil) when the exchange goes on unprocessed, an error when it ends.
func (x *exchange) await(ctx context.Context, want phase, timed bool) (*extprocv3.ProcessingResponse, error) {
	timeout := x.timeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := timer.C
	if !timed {
		expired = nil
	}
	extended := false
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, x.failure(&localError{kind: LocalTimeout, status: http.StatusGatewayTimeout,
				details:  fmt.Sprintf("no reply to %s within %v (ext_proc_error_per-message_timeout_exceeded)", want, timeout),
				failOpen: true})
		case r := <-x.st.msgs:
			if r.err != nil {
				return nil, x.streamEnded(ctx, r.err, want)
			}
			x.res.Received = append(x.res.Received, r.msg)
			if d := r.msg.GetOverrideMessageTimeout(); d != nil {
				if x.extendTimer(timer, d, &extended) {
					timeout = d.AsDuration()
				}
				continue
			}
			return r.msg, nil
		}
	}
}

// extendTimer applies override_message_timeout as Envoy's onNewTimeout: once
// per message, within [1ms, max_message_timeout].
func (x *exchange) extendTimer(t *time.Timer, d *durationpb.Duration, extended *bool) bool {
	v := d.AsDuration()
	switch {
	case x.f.MaxMessageTimeout <= 0:
		x.res.note("override_message_timeout %v ignored: max_message_timeout not set", v)
	case v < time.Millisecond || v > x.f.MaxMessageTimeout:
		x.res.note("override_message_timeout %v ignored: out of [1ms, %v]", v, x.f.MaxMessageTimeout)
	case *extended:
		x.res.note("override_message_timeout %v ignored: timer already restarted for this message", v)
	default:
		*extended = true
		t.Reset(v)
		return true
	}
	return false
}

// accept checks a reply against the reply rule.
func (x *exchange) accept(r *extprocv3.ProcessingResponse, want phase) (*extprocv3.ProcessingResponse, error) {
	x.env.receive(&x.f.Forwarding, r, x.res)
	got := replyPhase(r)
	if got == phaseImmediate {
		return nil, x.immediate(r.GetImmediateResponse())
	}
	if got != want {
		return nil, x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
			details: fmt.Sprintf("got %s while waiting for %s", got, want), failOpen: true})
	}
	if CommonOf(r).GetBodyMutation().GetStreamedResponse() != nil {
		return nil, x.failure(&localError{kind: LocalSpurious, status: http.StatusInternalServerError,
			details: fmt.Sprintf("%s carries body_mutation.streamed_response outside FULL_DUPLEX_STREAMED", got), failOpen: true})
	}
	if o := r.GetModeOverride(); o != nil {
		switch {
		case !want.isHeaders():
			x.res.note("mode_override in a %s reply ignored", got)
		case !x.f.AllowModeOverride:
			x.res.note("mode_override ignored: allow_mode_override is false")
		case x.duplexConfigured():
			x.res.note("mode_override ignored: FULL_DUPLEX_STREAMED is configured")
		default:
			if err := x.override(o); err != nil {
				x.closeStream()
				return nil, err
			}
		}
	}
	return r, nil
}

// streamEnded handles the end of the Process stream while a reply was due.
func (x *exchange) streamEnded(ctx context.Context, err error, want phase) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		x.res.note("server ended the stream before replying to %s; continuing without the processor", want)
		x.closeStream()
		return nil
	}
	x.res.StreamErr = err
	st := status.Convert(err)
	return x.failure(&localError{kind: LocalGRPCError, status: http.StatusInternalServerError,
		details:  fmt.Sprintf("ext_proc_error_gRPC_error_%d{%s} while waiting for %s", st.Code(), st.Message(), want),
		failOpen: true})
}

// failure ends processing after an error: the exchange continues unprocessed
// under failure_mode_allow when the error allows it, or ends with le.
func (x *exchange) failure(le *localError) error {
	x.closeStream()
	if le.failOpen && x.f.FailureModeAllow {
		x.res.FailedOpen = true
		x.res.note("failure_mode_allow: %s (%s); continuing without the processor", le.kind, le.details)
		return nil
	}
	return le
}

// fatal ends the exchange with a local reply failure_mode_allow cannot avoid.
func (x *exchange) fatal(kind string, code int, details string) error {
	x.closeStream()
	return &localError{kind: kind, status: code, details: details}
}

func (x *exchange) mutate(h *headerList, m *extprocv3.HeaderMutation, replacing, dropCL bool, where string) error {
	o := mutation{where: where, replacing: replacing, dropContentLength: dropCL}
	if err := x.mu.apply(h, m, o); err != nil {
		return x.fatal(LocalInvalidMutation, http.StatusInternalServerError, err.Error())
	}
	return nil
}

func (x *exchange) closeStream() {
	x.done = true
	if x.st != nil {
		x.st.close()
	}
}
