// Package sse decodes a text/event-stream body incrementally, from chunks
// cut at arbitrary points, and re-encodes events with their original framing.
//
// A [Decoder] splits the stream into events, each ending with its blank
// line; it holds back only the bytes of an incomplete event. Every event
// keeps its exact bytes ([Event.Raw]), so a stream re-emitted from the events'
// Raw and the held bytes ([Decoder.Pending]) is byte-identical to the input;
// [Event.WithData] rewrites only the data lines of one event.
//
// Parsing follows the WHATWG HTML "event stream interpretation": lines end
// with CRLF, LF or CR; a line starting with ':' is a comment; "field: value"
// drops one space after the colon; the values of an event's "data" lines are
// joined with "\n"; one leading U+FEFF at stream start is ignored.
//
// Typical use, once per STREAMED chunk:
//
//	events, err := dec.Feed(chunk)
//	for _, e := range events { out = append(out, e.Raw...) } // or e.WithData(...)
//	// reply with out; the held bytes follow with a later chunk.
//	// At end of stream: if e, ok := dec.Flush(); ok { out = append(out, e.Raw...) }
package sse

import (
	"bytes"
	"errors"
	"strings"
)

// DefaultMaxEvent is the event size limit of a Decoder made with a limit of
// zero or less, or of a zero Decoder.
const DefaultMaxEvent = 16 << 20

// ErrEventTooLarge is returned by Feed when an event (complete or held)
// exceeds the decoder's limit. The decoder then stays failed.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// bom is the UTF-8 encoding of U+FEFF.
const bom = "\xef\xbb\xbf"

// Event is one event of the stream.
//
// Its slices alias either the chunk passed to Feed or the decoder's buffers:
// they are valid until the next call to Feed or Flush on the same decoder,
// and as long as the chunk is not modified. Copy what must outlive that.
type Event struct {
	// Raw is the exact bytes of the event including its terminating blank
	// line (and, for the first event of a stream, a leading byte order
	// mark).
	Raw []byte
	// Data is the event's data: the values of its "data" lines joined with
	// "\n"; nil if it has no data line, empty (not nil) for "data:".
	Data []byte
	// Type is the value of the event's last "event" line, nil if none (the
	// type is then "message").
	Type []byte
	// ID is the value of the event's last "id" line, nil if none (or if it
	// contains U+0000, which clients ignore).
	ID []byte

	bom          int  // length of the byte order mark at the start of Raw
	unterminated bool // from Flush: the stream ended before the blank line
}

// Terminated reports whether the event ended with its blank line. Only the
// event returned by Flush can be unterminated: clients that follow the
// specification discard it, but some dispatch it, so inspect it like any
// other.
func (e Event) Terminated() bool { return !e.unterminated }

// Decoder splits a stream into events. The zero Decoder is ready to use, with
// the limit DefaultMaxEvent. A Decoder serves one stream and is not safe for
// concurrent use.
type Decoder struct {
	max     int
	started bool // the byte order mark question is settled
	bomNext int  // the next event starts with a byte order mark of this length

	held    []byte    // the incomplete event, from its first byte
	heldBOM int       // byte order mark length at the start of held
	st      lineState // scan state at the end of held
	spare   []byte    // the other buffer: Raw of the event completed last

	events []Event // returned by Feed, reused
	arena  []byte  // joined multi-line data, reused
	err    error
}

// NewDecoder returns a decoder that fails with ErrEventTooLarge when one
// event exceeds maxEvent bytes (DefaultMaxEvent if maxEvent <= 0).
func NewDecoder(maxEvent int) *Decoder {
	return &Decoder{max: maxEvent}
}

func (d *Decoder) limit() int {
	if d.max <= 0 {
		return DefaultMaxEvent
	}
	return d.max
}

// Feed appends a chunk of the stream and returns the events it completed, in
// order. The bytes of an incomplete event are copied and held until a later
// chunk completes it; complete events inside chunk alias chunk without a
// copy. The returned slice and the events are valid until the next call to
// Feed or Flush. When an event outgrows the limit, Feed returns
// ErrEventTooLarge together with the events of this chunk completed before
// it; every later call returns the error alone.
func (d *Decoder) Feed(chunk []byte) ([]Event, error) {
	d.events = d.events[:0]
	d.arena = d.arena[:0]
	if d.err != nil {
		return nil, d.err
	}
	if len(chunk) == 0 {
		return nil, nil
	}
	if !d.started {
		if len(d.held) > 0 { // a held prefix of a byte order mark
			c := make([]byte, 0, len(d.held)+len(chunk))
			c = append(c, d.held...)
			chunk = append(c, chunk...)
			d.held = nil // not reused: Pending's last result stays intact
		}
		if len(chunk) < len(bom) && strings.HasPrefix(bom, string(chunk)) {
			d.held = append(d.held, chunk...)
			d.st = lineState{empty: true}
			return nil, nil
		}
		d.started = true
		if len(chunk) >= len(bom) && string(chunk[:len(bom)]) == bom {
			d.bomNext = len(bom)
		}
	}
	max := d.limit()
	sc := scan{b: chunk, cr: -1}
	i := 0
	if len(d.held) > 0 {
		end, ok := sc.findEnd(0, &d.st)
		if !ok {
			if len(d.held)+len(chunk) > max {
				return nil, d.fail()
			}
			d.held = grow(d.held, chunk)
			return d.events, nil
		}
		if len(d.held)+end > max {
			return nil, d.fail()
		}
		d.held = append(d.held, chunk[:end]...)
		d.events = append(d.events, d.parse(d.held, d.heldBOM, true))
		// The event aliases the old held buffer: hold new bytes in the other.
		d.held, d.spare = d.spare[:0], d.held
		d.heldBOM = 0
		i = end
	}
	for i < len(chunk) {
		skip := d.bomNext
		d.bomNext = 0
		st := lineState{empty: true}
		end, ok := sc.findEnd(i+skip, &st)
		if !ok {
			if len(chunk)-i > max {
				return d.events, d.fail()
			}
			d.held = append(d.held[:0], chunk[i:]...)
			d.heldBOM = skip
			d.st = st
			break
		}
		if end-i > max {
			return d.events, d.fail()
		}
		d.events = append(d.events, d.parse(chunk[i:end], skip, true))
		i = end
	}
	return d.events, nil
}

// grow appends b to held, doubling the capacity when it must grow: an event
// held across many chunks is copied O(size) times in all, not once per
// 25 % of growth as plain append does past a few hundred KiB.
func grow(held, b []byte) []byte {
	if need := len(held) + len(b); need > cap(held) {
		n := make([]byte, len(held), max(need, 2*cap(held)))
		copy(n, held)
		held = n
	}
	return append(held, b...)
}

func (d *Decoder) fail() error {
	d.err = ErrEventTooLarge
	return d.err
}

// Pending returns the held bytes: the start of an event that no blank line
// has ended yet. The bytes stay unchanged through the next call to Feed
// (which only appends past them or sets their buffer aside), and are valid
// until the call after it or Flush.
func (d *Decoder) Pending() []byte { return d.held }

// Flush ends the stream: it returns the held bytes as a final, unterminated
// event (ok false when nothing is held) and empties the decoder. Its data is
// that of the complete lines and of a last line without line ending.
func (d *Decoder) Flush() (e Event, ok bool) {
	d.events = d.events[:0]
	d.arena = d.arena[:0]
	if len(d.held) == 0 {
		return Event{}, false
	}
	skip := d.heldBOM
	if !d.started {
		skip = 0 // an incomplete byte order mark is data
	}
	e = d.parse(d.held, skip, false)
	d.held, d.spare = d.spare[:0], d.held
	d.heldBOM = 0
	d.st = lineState{}
	return e, true
}

// parse reads the fields of the event raw, whose first bomLen bytes are a
// byte order mark.
func (d *Decoder) parse(raw []byte, bomLen int, terminated bool) Event {
	e := Event{Raw: raw, bom: bomLen, unterminated: !terminated}
	ls := lines{s: scan{b: raw, cr: -1}, i: bomLen}
	nData := 0
	arenaStart := 0
	for {
		l, ok := ls.next()
		if !ok {
			break
		}
		ln := raw[l.start:l.end]
		if len(ln) == 0 || ln[0] == ':' {
			continue
		}
		name, value := field(ln)
		switch string(name) {
		case "data":
			nData++
			switch nData {
			case 1:
				e.Data = value
			case 2:
				arenaStart = len(d.arena)
				d.arena = append(d.arena, e.Data...)
				fallthrough
			default:
				d.arena = append(d.arena, '\n')
				d.arena = append(d.arena, value...)
			}
		case "event":
			e.Type = value
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				e.ID = value
			}
		}
	}
	if nData > 1 {
		e.Data = d.arena[arenaStart:len(d.arena):len(d.arena)]
	}
	return e
}

// AppendEvent appends a new event to dst: an "event" line when typ is not
// empty, data as "data: " lines (split at line breaks, which a data line
// cannot carry), and the blank line that ends the event. Lines end with LF.
// typ must not contain a line break.
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	dst = appendData(dst, data, true, lf, lf)
	return append(dst, '\n')
}

var lf = []byte("\n")

// WithData returns the event's bytes with its data replaced: the new data,
// split into lines at "\n" (and at CR, which SSE cannot carry inside a
// line), takes the place of the first data line, the other data lines are
// dropped, and every other line, line ending and the blank line are kept.
// The new lines use the first data line's line ending and its "data:" or
// "data: " style; an event without data gets them before its blank line.
// nil data removes the data lines. The result is a new slice.
func (e Event) WithData(data []byte) []byte {
	raw := e.Raw
	out := make([]byte, 0, len(raw)+len(data)+16)
	out = append(out, raw[:e.bom]...)
	ls := lines{s: scan{b: raw, cr: -1}, i: e.bom}
	wrote := data == nil
	lastEnd := []byte("\n")
	for {
		l, ok := ls.next()
		if !ok {
			break
		}
		ln, nl := raw[l.start:l.end], raw[l.end:l.next]
		if len(nl) > 0 {
			lastEnd = nl
		}
		switch {
		case len(ln) == 0: // the blank line
			if !wrote {
				out = appendData(out, data, true, nl, nl)
				wrote = true
			}
			out = appendLine(out, raw[l.start:l.next])
		case isData(ln):
			if !wrote {
				sep := nl
				if len(sep) == 0 {
					sep = lastEnd
				}
				out = appendData(out, data, bytes.HasPrefix(ln, []byte("data: ")), sep, nl)
				wrote = true
			}
		default:
			out = appendLine(out, raw[l.start:l.next])
		}
	}
	if !wrote { // unterminated, without data lines
		if n := len(out); n > e.bom && out[n-1] != '\n' && out[n-1] != '\r' {
			out = append(out, lastEnd...)
		}
		out = appendData(out, data, true, lastEnd, lastEnd)
	}
	if e.bom == 0 && bytes.HasPrefix(out, []byte(bom)) {
		// Removing the data lines brought a line starting with U+FEFF to
		// the front; at the start of a stream it would read as a byte
		// order mark and change that line's field name. A comment line
		// keeps it where it was: not first.
		out = append(append([]byte(":"), lastEnd...), out...)
	}
	return out
}

// appendLine appends a line with its terminator. Dropped data lines can
// bring a line ending in a lone CR next to one starting with LF, which a
// parser would read as one CRLF; the CR then becomes a CRLF itself so the
// lines stay apart.
func appendLine(out, line []byte) []byte {
	if n := len(out); n > 0 && out[n-1] == '\r' && len(line) > 0 && line[0] == '\n' {
		out = append(out, '\n')
	}
	return append(out, line...)
}

func isData(ln []byte) bool {
	return bytes.HasPrefix(ln, []byte("data")) && (len(ln) == 4 || ln[4] == ':')
}

// appendData appends data as data lines, each ended by sep except the last,
// ended by last.
func appendData(out, data []byte, space bool, sep, last []byte) []byte {
	for {
		k := bytes.IndexAny(data, "\r\n")
		part := data
		if k >= 0 {
			part = data[:k]
		}
		out = append(out, "data:"...)
		if space || (len(part) > 0 && part[0] == ' ') {
			out = append(out, ' ')
		}
		out = append(out, part...)
		if k < 0 {
			return append(out, last...)
		}
		out = append(out, sep...)
		if data[k] == '\r' && k+1 < len(data) && data[k+1] == '\n' {
			k++
		}
		data = data[k+1:]
	}
}
