package stdioconn

import (
	"bufio"
	"errors"
	"io"
	"time"

	"github.com/rs/zerolog"
)

// Bounds of what a child's stderr may cost the sidecar's log.
const (
	// DefaultStderrLineBytes is the longest stderr line logged; the rest of
	// a longer line is dropped (the entry says so).
	DefaultStderrLineBytes = 1024
	// DefaultStderrLinesPerSecond is the steady rate of stderr lines
	// logged; up to DefaultStderrBurst more may come at once. Lines beyond
	// are dropped and counted in the next line logged.
	DefaultStderrLinesPerSecond = 20
	DefaultStderrBurst          = 100
)

// stderrLog copies the lines of r to log, each capped at maxLine bytes, at
// most perSecond lines a second after a burst of burst, until r ends.
type stderrLog struct {
	log       zerolog.Logger
	maxLine   int
	perSecond float64
	burst     float64
	now       func() time.Time
}

// run reads r to its end (the child and everything it started exited, or
// the pipe was closed).
func (s stderrLog) run(r io.Reader) {
	br := bufio.NewReaderSize(r, s.maxLine+1)
	tokens, last := s.burst, s.now()
	dropped := 0
	for {
		line, truncated, err := readLine(br, s.maxLine)
		if len(line) > 0 || truncated {
			now := s.now()
			tokens += now.Sub(last).Seconds() * s.perSecond
			if tokens > s.burst {
				tokens = s.burst
			}
			last = now
			if tokens < 1 {
				dropped++
			} else {
				tokens--
				ev := s.log.Info().Str("stderr", string(line))
				if truncated {
					ev = ev.Bool("truncated", true)
				}
				if dropped > 0 {
					ev = ev.Int("dropped_lines", dropped)
					dropped = 0
				}
				ev.Msg("plugin process stderr")
			}
		}
		if err != nil {
			if dropped > 0 {
				s.log.Info().Int("dropped_lines", dropped).Msg("plugin process stderr")
			}
			return
		}
	}
}

// readLine returns the next line of br without its end of line, at most
// limit bytes of it; truncated says more was dropped. err is set at the end
// of the stream (line may still hold its last, unterminated line).
func readLine(br *bufio.Reader, limit int) (line []byte, truncated bool, err error) {
	for {
		frag, ferr := br.ReadSlice('\n')
		if ferr == nil {
			frag = frag[:len(frag)-1] // the '\n'
		}
		room := max(limit-len(line), 0)
		if len(frag) > room {
			frag, truncated = frag[:room], true
		}
		line = append(line, frag...)
		switch {
		case ferr == nil:
			return trimCR(line), truncated, nil
		case errors.Is(ferr, bufio.ErrBufferFull):
			continue
		default:
			return trimCR(line), truncated, ferr
		}
	}
}

// trimCR drops a trailing "\r" (a "\r\n" line end).
func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
