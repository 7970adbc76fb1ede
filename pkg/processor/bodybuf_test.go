package processor

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/ruleset"
)

// TestBodyBuffersNotSharedInFlight: a filtered list is built in a buffer
// lent from the Server's pool, which a later stream may reuse only once
// the reply carrying it was sent. Streams in a row and at once each keep
// their answer intact until their reply is sent (run with -race: a buffer
// handed out while in flight is a write racing the reads here).
func TestBodyBuffersNotSharedInFlight(t *testing.T) {
	rig := newBudgetRig(t, "plugins: []\nextproc:\n  mcp_paths: [/mcp]\n"+ruleset.Twenty())
	lists := make([]*encodedExchange, 4)
	for i := range lists {
		x := budgetExchange{
			reqHeaders:  mcpHeaders(toolsListBody),
			reqBody:     toolsListBody,
			respHeaders: []string{":status", "200", "content-type", "application/json"},
			respBody:    []string{toolsListOf(t, 60+20*i, 10+5*i)},
		}
		lists[i] = rig.prepare(t, x)
	}
	want := make([][]byte, len(lists))
	for i, ex := range lists {
		res, err := rig.exchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		if err := listed(50 + 15*i)(res); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
		want[i] = bytes.Clone(res.answer)
		res.sent()
	}

	// In a row: every reply is still in flight when the next stream edits.
	var held []*budgetResult
	for i, ex := range lists {
		res, err := rig.exchange(ex)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, res)
		for j, h := range held {
			if !bytes.Equal(h.answer, want[j]) {
				t.Fatalf("after stream %d, the answer of stream %d changed while in flight", i, j)
			}
		}
	}
	for _, h := range held {
		h.sent()
	}

	// At once, reusing the buffers sent.
	var wg sync.WaitGroup
	errs := make(chan error, len(lists))
	for i, ex := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				res, err := rig.exchange(ex)
				if err != nil {
					errs <- err
					return
				}
				got := bytes.Clone(res.answer)
				if !bytes.Equal(res.answer, want[i]) || !bytes.Equal(got, want[i]) {
					errs <- fmt.Errorf("stream of list %d: answer changed while in flight", i)
					return
				}
				res.sent()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
