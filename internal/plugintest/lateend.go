package plugintest

import (
	"net/http"
	"time"
)

// LateStreamEnd wraps h so that every response ends d after h returns: the
// answer is flushed at once, the end of the body comes later. It plays a
// server whose stream outlives its answer by a moment — a go-sdk stateless
// handler closing its per-request session, any server in another process
// under load — which is what makes a client that stops reading at the
// answer lose its keep-alive connection.
func LateStreamEnd(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	})
}
