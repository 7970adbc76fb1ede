package cpexpb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/types/known/structpb"
)

// decoder is a jsontext decoder and its reader, reused through decoders
// (a decoder holds buffers worth keeping between calls).
type decoder struct {
	rd  bytes.Reader
	dec *jsontext.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := new(decoder)
	d.dec = jsontext.NewDecoder(&d.rd)
	return d
}}

// StructFromJSON decodes a JSON object into a Struct. Empty input and JSON
// null give nil (no Struct); anything but an object is an error.
func StructFromJSON(raw []byte) (*structpb.Struct, error) {
	v, err := ValueFromJSON(raw)
	if err != nil || v == nil {
		return nil, err
	}
	s := v.GetStructValue()
	if s == nil {
		if _, null := v.GetKind().(*structpb.Value_NullValue); null {
			return nil, nil
		}
		return nil, errors.New("cpexpb: want a JSON object")
	}
	return s, nil
}

// ValueFromJSON decodes one JSON value into a structpb Value; empty input
// gives nil.
func ValueFromJSON(raw []byte) (*structpb.Value, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	d := decoders.Get().(*decoder)
	d.rd.Reset(raw)
	d.dec.Reset(&d.rd)
	dec := d.dec
	defer func() {
		d.rd.Reset(nil)
		decoders.Put(d)
	}()
	v, err := readValue(dec)
	if err != nil {
		return nil, fmt.Errorf("cpexpb: decode JSON: %w", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("cpexpb: decode JSON: data after the value")
	}
	return v, nil
}

func readValue(dec *jsontext.Decoder) (*structpb.Value, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return structpb.NewNullValue(), nil
	case 't', 'f':
		return structpb.NewBoolValue(tok.Bool()), nil
	case '"':
		return structpb.NewStringValue(tok.String()), nil
	case '0':
		f, err := tok.Float()
		if err != nil {
			return nil, err
		}
		return structpb.NewNumberValue(f), nil
	case '{':
		s, err := readObject(dec)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	case '[':
		var l structpb.ListValue
		for dec.PeekKind() != ']' {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			l.Values = append(l.Values, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return structpb.NewListValue(&l), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok.Kind())
}

// readObject reads the members of an object whose '{' was read.
func readObject(dec *jsontext.Decoder) (*structpb.Struct, error) {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids tok
		v, err := readValue(dec)
		if err != nil {
			return nil, err
		}
		s.Fields[name] = v
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return s, nil
}

// StructToJSON appends the JSON object s to dst; a nil s appends "null".
// Members are written in map order (not sorted).
func StructToJSON(dst []byte, s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	return appendStruct(dst, s)
}

// ValueToJSON appends the JSON of v to dst; a nil v appends "null".
func ValueToJSON(dst []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return append(dst, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(dst, k.BoolValue), nil
	case *structpb.Value_StringValue:
		return jsontext.AppendQuote(dst, k.StringValue)
	case *structpb.Value_NumberValue:
		return appendNumber(dst, k.NumberValue)
	case *structpb.Value_StructValue:
		return StructToJSON(dst, k.StructValue)
	case *structpb.Value_ListValue:
		dst = append(dst, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = ValueToJSON(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	return nil, fmt.Errorf("cpexpb: unknown Value kind %T", v.GetKind())
}

func appendStruct(dst []byte, s *structpb.Struct) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	for k, v := range s.GetFields() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		var err error
		if dst, err = jsontext.AppendQuote(dst, k); err != nil {
			return nil, err
		}
		dst = append(dst, ':')
		if dst, err = ValueToJSON(dst, v); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendNumber writes f as encoding/json writes a float64: whole numbers
// without exponent or fraction up to 1e21, so an integer sent as a double
// decodes into a Go int again.
func appendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("cpexpb: %v is not a JSON number", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, 64), nil
}
