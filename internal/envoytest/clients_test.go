package envoytest

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestClientsSpreadStreams: with several servers, each exchange's stream
// goes to one of them (all its messages there), every server gets some of
// 64 streams, and the strict rules hold on each: a server that breaks the
// reply rule fails the exchanges it gets, the others pass.
func TestClientsSpreadStreams(t *testing.T) {
	var counts [3]atomic.Int64
	var clients []extprocv3.ExternalProcessorClient
	for i := range counts {
		fn := func(req *extprocv3.ProcessingRequest) step {
			counts[i].Add(1)
			if i == 2 { // answers request headers with a response-headers reply
				return reply(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}})
			}
			return passAll(req)
		}
		clients = append(clients, Serve(t, &scripted{fn: fn}))
	}
	f := Filter{Clients: clients, MessageTimeout: generous}
	var served [3]int
	for range 64 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := f.Do(ctx, &Request{Method: "GET", Path: "/"}, canned(200, nil))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		served[res.Server]++
		if broken := res.Server == 2; broken != (res.LocalError == LocalSpurious) || broken != (res.Status == http.StatusInternalServerError) {
			t.Fatalf("server %d: status %d, local error %q", res.Server, res.Status, res.LocalError)
		}
	}
	for i, n := range served {
		// Each exchange sends two messages to a working server (request and
		// response headers), one to the broken one.
		want := int64(2 * n)
		if i == 2 {
			want = int64(n)
		}
		if n == 0 || counts[i].Load() != want {
			t.Errorf("server %d: %d exchanges, %d messages (want %d, and some exchanges)", i, n, counts[i].Load(), want)
		}
	}
}
