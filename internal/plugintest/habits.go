package plugintest

import (
	"net/http"
	"time"
)

// Habits are how a server's HTTP stack frames its answers and treats idle
// connections, imitated by a Go plugin server (docs/plugin-transports.md
// has what Node.js, uvicorn and net/http do). The zero value is net/http's
// own: Content-Length: 0 on a 202, chunked SSE, no idle timeout. They
// complement the real Node.js server ([StartNode]); they do not replace it.
type Habits struct {
	// ChunkedEmpty202 answers notifications as Node.js does: 202 Accepted,
	// Transfer-Encoding: chunked, an empty body.
	ChunkedEmpty202 bool
	// CloseEach answers every request with Connection: close.
	CloseEach bool
	// IdleTimeout closes a connection idle this long (Node.js and uvicorn:
	// 5 s); 0: never.
	IdleTimeout time.Duration
}

// HabitCase is one row of [HabitMatrix].
type HabitCase struct {
	Name   string
	Habits Habits
	// Reused says whether a client that reads every answer to its end
	// keeps using one connection for a burst of calls.
	Reused bool
}

// HabitMatrix returns the framings a client must reuse connections across
// (or, for Connection: close, survive), for table tests.
func HabitMatrix() []HabitCase {
	return []HabitCase{
		{Name: "go-net-http", Reused: true},
		{Name: "chunked-empty-202", Habits: Habits{ChunkedEmpty202: true}, Reused: true},
		{Name: "connection-close", Habits: Habits{CloseEach: true}},
		{Name: "chunked-202-and-close", Habits: Habits{ChunkedEmpty202: true, CloseEach: true}},
	}
}

// WithHabits makes the server answer with habits h.
func WithHabits(h Habits) Option {
	return func(s *Server) { s.habits = h }
}

// wrap returns next answering with the habits.
func (h Habits) wrap(next http.Handler) http.Handler {
	if !h.ChunkedEmpty202 && !h.CloseEach {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&habitWriter{ResponseWriter: w, h: h}, r)
	})
}

// habitWriter writes the header with the habits: Connection: close
// (whatever the handler set), and a 202's header flushed at once, which
// makes net/http frame its (empty) body as chunks, no Content-Length being
// set.
type habitWriter struct {
	http.ResponseWriter
	h     Habits
	wrote bool
}

func (w *habitWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.h.CloseEach {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusAccepted && w.h.ChunkedEmpty202 {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *habitWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *habitWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *habitWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
