// Package jsonscan finds and rewrites the string values of a JSON text in
// one streaming pass, leaving every other byte as it was: the built-in
// plugins look at and mask strings (arguments, tool results) without
// decoding the payload into maps and encoding it again.
package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Func is called for each string value with its path: the object member
// names from the scanned value down (array indexes are left out, as
// cpex's field filters leave them out). The path is only filled when
// [Walker.Paths] is set, and is valid only during the call. Returning
// replace true replaces the string with repl.
type Func func(path []string, s string) (repl string, replace bool)

// ErrLimit is wrapped by the errors of a value deeper or larger than the
// walker's limits.
var ErrLimit = errors.New("JSON value over the limit")

// Walker walks JSON values. The zero value walks anything without paths.
type Walker struct {
	// Paths makes Func receive the path of each string.
	Paths bool
	// Indexes puts array indexes in the paths too, as "[0]".
	Indexes bool
	// MaxDepth bounds the nesting of objects and arrays (0: none).
	MaxDepth int
	// MaxItems bounds the members of one object or elements of one array
	// (0: none).
	MaxItems int
	// Decoders, if set, lends the decoder (a fresh one costs more than a
	// walk of a kilobyte).
	Decoders *Decoders
}

// Decoders keeps decoders for reuse across calls and goroutines; the zero
// value is ready. Each plugin instance keeps its own.
type Decoders struct{ pool sync.Pool }

type decoder struct {
	r bytes.Reader
	d jsontext.Decoder
}

// get returns a decoder reading in; put gives it back.
func (ds *Decoders) get(in []byte) *decoder {
	var dec *decoder
	if ds != nil {
		dec, _ = ds.pool.Get().(*decoder)
	}
	if dec == nil {
		dec = &decoder{}
	}
	dec.r.Reset(in)
	// A duplicate name is an error (the default): a plugin must not mask
	// one "args" and forward another.
	dec.d.Reset(&dec.r)
	return dec
}

func (ds *Decoders) put(dec *decoder) {
	if ds != nil {
		dec.r.Reset(nil)
		ds.pool.Put(dec)
	}
}

type edit struct {
	start, end int64
	repl       string
}

// Rewrite calls fn for every string value (not object member names) of the
// value of the top-level member named member of the JSON object in, or of
// the whole of in when member is "", and returns in with the strings fn
// replaced. It returns in itself (same slice) when nothing was replaced,
// and changed false. A member that is absent is not an error: nothing is
// visited.
func (w Walker) Rewrite(in []byte, member string, fn Func) (out []byte, changed bool, err error) {
	dec := w.Decoders.get(in)
	defer w.Decoders.put(dec)
	s := scan{w: w, d: &dec.d, fn: fn}
	if member == "" {
		err = s.value(0)
	} else {
		err = s.member(member)
	}
	if err != nil {
		return nil, false, err
	}
	if len(s.edits) == 0 {
		return in, false, nil
	}
	out = make([]byte, 0, len(in)+16*len(s.edits))
	var at int64
	for _, e := range s.edits {
		out = append(out, in[at:e.start]...)
		if out, err = jsontext.AppendQuote(out, e.repl); err != nil {
			return nil, false, fmt.Errorf("jsonscan: %w", err)
		}
		at = e.end
	}
	return append(out, in[at:]...), true, nil
}

type scan struct {
	w     Walker
	d     *jsontext.Decoder
	fn    Func
	path  []string
	edits []edit
}

// member walks the value of the top-level member name.
func (s *scan) member(name string) error {
	tok, err := s.d.ReadToken()
	if err != nil {
		return fmt.Errorf("jsonscan: %w", err)
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("jsonscan: payload is not a JSON object")
	}
	for s.d.PeekKind() != '}' {
		k, err := s.d.ReadToken()
		if err != nil {
			return fmt.Errorf("jsonscan: %w", err)
		}
		if k.String() != name {
			if err := s.d.SkipValue(); err != nil {
				return fmt.Errorf("jsonscan: %w", err)
			}
			continue
		}
		// The rest is read too, so that a second member of the same name
		// is an error rather than a value left unscanned.
		if err := s.value(0); err != nil {
			return err
		}
	}
	if _, err := s.d.ReadToken(); err != nil {
		return fmt.Errorf("jsonscan: %w", err)
	}
	return nil
}

// value walks one value at nesting depth.
func (s *scan) value(depth int) error {
	switch s.d.PeekKind() {
	case '"':
		v, err := s.d.ReadValue()
		if err != nil {
			return fmt.Errorf("jsonscan: %w", err)
		}
		var str string
		if bytes.IndexByte(v, '\\') < 0 {
			str = string(v[1 : len(v)-1])
		} else {
			b, err := jsontext.AppendUnquote(nil, v)
			if err != nil {
				return fmt.Errorf("jsonscan: %w", err)
			}
			str = string(b)
		}
		if repl, ok := s.fn(s.path, str); ok {
			end := s.d.InputOffset()
			s.edits = append(s.edits, edit{start: end - int64(len(v)), end: end, repl: repl})
		}
		return nil
	case '{', '[':
		open, err := s.d.ReadToken()
		if err != nil {
			return fmt.Errorf("jsonscan: %w", err)
		}
		if s.w.MaxDepth > 0 && depth >= s.w.MaxDepth {
			return fmt.Errorf("%w: nested deeper than %d", ErrLimit, s.w.MaxDepth)
		}
		closer := jsontext.Kind(']')
		if open.Kind() == '{' {
			closer = '}'
		}
		n := 0
		for s.d.PeekKind() != closer {
			if n++; s.w.MaxItems > 0 && n > s.w.MaxItems {
				return fmt.Errorf("%w: more than %d items in one collection", ErrLimit, s.w.MaxItems)
			}
			if closer == '}' {
				name, err := s.d.ReadToken()
				if err != nil {
					return fmt.Errorf("jsonscan: %w", err)
				}
				if s.w.Paths {
					s.path = append(s.path, name.String())
				}
			} else if s.w.Paths && s.w.Indexes {
				s.path = append(s.path, "["+strconv.Itoa(n-1)+"]")
			}
			if err := s.value(depth + 1); err != nil {
				return err
			}
			if s.w.Paths && (closer == '}' || s.w.Indexes) {
				s.path = s.path[:len(s.path)-1]
			}
		}
		if _, err := s.d.ReadToken(); err != nil {
			return fmt.Errorf("jsonscan: %w", err)
		}
		return nil
	default:
		if _, err := s.d.ReadToken(); err != nil {
			return fmt.Errorf("jsonscan: %w", err)
		}
		return nil
	}
}

// Member returns the string value of the top-level member name of the JSON
// object in, and whether it is there as a string.
func Member(in []byte, name string) (string, bool, error) { return (*Decoders)(nil).Member(in, name) }

// Member is [Member] with a lent decoder.
func (ds *Decoders) Member(in []byte, name string) (string, bool, error) {
	dec := ds.get(in)
	defer ds.put(dec)
	d := &dec.d
	tok, err := d.ReadToken()
	if err != nil {
		return "", false, fmt.Errorf("jsonscan: %w", err)
	}
	if tok.Kind() != '{' {
		return "", false, fmt.Errorf("jsonscan: payload is not a JSON object")
	}
	for d.PeekKind() != '}' {
		k, err := d.ReadToken()
		if err != nil {
			return "", false, fmt.Errorf("jsonscan: %w", err)
		}
		if k.String() != name {
			if err := d.SkipValue(); err != nil {
				return "", false, fmt.Errorf("jsonscan: %w", err)
			}
			continue
		}
		v, err := d.ReadToken()
		if err != nil {
			return "", false, fmt.Errorf("jsonscan: %w", err)
		}
		if v.Kind() != '"' {
			return "", false, nil
		}
		return v.String(), true, nil
	}
	return "", false, nil
}
