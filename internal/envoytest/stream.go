package envoytest

import (
	"context"
	"fmt"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// received is one Recv outcome: a message, or the error that ended the stream.
type received struct {
	msg *extprocv3.ProcessingResponse
	err error
}

// procStream is one Process stream. A receiver goroutine turns Recv into a
// channel so waits can select on the message timer; close stops it.
type procStream struct {
	cs       extprocv3.ExternalProcessor_ProcessClient
	cancel   context.CancelFunc
	ctx      context.Context
	msgs     chan received
	wg       sync.WaitGroup
	closed   bool
	inflight chan error // result of the last queued send
}

func openStream(ctx context.Context, c extprocv3.ExternalProcessorClient) (*procStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	cs, err := c.Process(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open process stream: %w", err)
	}
	s := &procStream{cs: cs, cancel: cancel, ctx: sctx, msgs: make(chan received)}
	s.wg.Add(1)
	go s.receive()
	return s, nil
}

func (s *procStream) receive() {
	defer s.wg.Done()
	for {
		m, err := s.cs.Recv()
		select {
		case s.msgs <- received{m, err}:
		case <-s.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// send queues m. grpc-go's Send blocks while the flow-control window is
// full, which must not keep the message timer from firing, so it runs in a
// goroutine; each send (and the final CloseSend) waits for the previous one,
// since grpc-go forbids concurrent sends. A send error means the stream ended:
// the receiver reports how.
func (s *procStream) send(m *extprocv3.ProcessingRequest) {
	s.chain(func() error { return s.cs.Send(m) })
}

// closeSend half-closes the stream after the queued sends.
func (s *procStream) closeSend() {
	s.chain(s.cs.CloseSend)
}

func (s *procStream) chain(op func() error) {
	prev := s.inflight
	done := make(chan error, 1)
	s.inflight = done
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if prev != nil {
			if err := <-prev; err != nil {
				done <- err
				return
			}
		}
		done <- op()
	}()
}

// close cancels the stream and waits for its goroutines.
func (s *procStream) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.cancel()
	s.wg.Wait()
}
