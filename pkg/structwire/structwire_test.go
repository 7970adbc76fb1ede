package structwire

import (
	"math"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

const ns = "envoy.filters.http.jwt_authn"

func jwtMetadata(t testing.TB) *corev3.Metadata {
	t.Helper()
	// Twelve claims, as a typical identity provider's token has.
	payload, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{
		"iss": "https://id.acme.example/realms/mcp", "sub": "alice", "aud": "mcp-gateway",
		"exp": 1893456000, "iat": 1893452400, "email": "alice@acme.example", "email_verified": true,
		"name": "Alice Example", "tenant": "acme", "nothing": nil,
		"realm_access": map[string]any{"roles": []any{"dev", "ops", 7}}, "groups": []any{"team-a"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{ns: payload, "other": {}}}
}

func encode(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func payloadOf(t *testing.T, b []byte) Struct {
	t.Helper()
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := m.Namespace(ns)
	if !ok {
		t.Fatalf("namespace %s missing", ns)
	}
	p, ok := s.Field("jwt_payload").Struct()
	if !ok {
		t.Fatal("jwt_payload is not a struct")
	}
	return p
}

// TestReads: each kind reads as what it holds, and as nothing else.
func TestReads(t *testing.T) {
	p := payloadOf(t, encode(t, jwtMetadata(t)))
	if s, ok := p.Field("sub").String(); !ok || s != "alice" {
		t.Errorf("sub = %q, %v", s, ok)
	}
	if _, ok := p.Field("sub").Number(); ok {
		t.Error("a string read as a number")
	}
	if f, ok := p.Field("exp").Number(); !ok || f != 1893456000 {
		t.Errorf("exp = %v, %v", f, ok)
	}
	if b, ok := p.Field("email_verified").Bool(); !ok || !b {
		t.Errorf("email_verified = %v, %v", b, ok)
	}
	if k := p.Field("nothing").Kind(); k != KindNull {
		t.Errorf("nothing has kind %d", k)
	}
	if v := p.Field("missing"); v != nil || v.Kind() != KindNone {
		t.Errorf("missing = %v", v)
	}
	items, ok := p.Path([]string{"realm_access", "roles"}).List()
	if !ok || len(items) != 3 {
		t.Fatalf("roles = %v, %v", items, ok)
	}
	if s, _ := items[1].String(); s != "ops" {
		t.Errorf("roles[1] = %q", s)
	}
	if _, ok := items[2].String(); ok {
		t.Error("a number item read as a string")
	}
	if v := p.Path([]string{"sub", "x"}); v != nil {
		t.Errorf("path through a string = %v", v)
	}
	if _, ok := mustParse(t, encode(t, jwtMetadata(t))).Namespace("absent"); ok {
		t.Error("absent namespace found")
	}
}

func mustParse(t *testing.T, b []byte) Metadata {
	t.Helper()
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// entryBytes encodes one map entry of a string key and a message value.
func entryBytes(key string, val []byte) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, val)
}

func fieldBytes(num protowire.Number, contents []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, contents)
}

func stringValue(s string) []byte { return fieldBytes(KindString, []byte(s)) }

// structOf encodes a Struct of the given entries, in order.
func structOf(entries ...[]byte) []byte {
	var b []byte
	for _, e := range entries {
		b = append(b, fieldBytes(1, e)...)
	}
	return b
}

// metadataOf encodes a Metadata of one namespace holding s.
func metadataOf(s []byte) []byte { return fieldBytes(1, entryBytes(ns, s)) }

// TestNonCanonical: encodings proto merges or reinterprets read as proto
// decodes them; encodings proto refuses are errors.
func TestNonCanonical(t *testing.T) {
	twoKinds := append(stringValue("first"), stringValue("second")...)
	mergedStruct := append(fieldBytes(KindStruct, structOf(entryBytes("a", stringValue("1")))),
		fieldBytes(KindStruct, structOf(entryBytes("b", stringValue("2"))))...)
	unknownInValue := append(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1), stringValue("v")...)
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, KindString, protowire.VarintType), 5)
	anyMD := encode(t, &corev3.Metadata{
		FilterMetadata:      map[string]*structpb.Struct{ns: {Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("typed beside")}}},
		TypedFilterMetadata: map[string]*anypb.Any{"t": {TypeUrl: "type.googleapis.com/x", Value: []byte{1}}},
	})
	for _, tc := range []struct {
		name    string
		md      []byte
		key     string
		want    string // "" with wantErr false: no string
		wantErr bool
	}{
		{"duplicate keys: last wins", metadataOf(structOf(entryBytes("k", stringValue("old")), entryBytes("k", stringValue("new")))), "k", "new", false},
		{"duplicate namespaces: last wins", append(metadataOf(structOf(entryBytes("k", stringValue("old")))), metadataOf(structOf(entryBytes("k", stringValue("new"))))...), "k", "new", false},
		{"a value with two kinds: the last", metadataOf(structOf(entryBytes("k", twoKinds))), "k", "second", false},
		{"a value with an unknown field", metadataOf(structOf(entryBytes("k", unknownInValue))), "k", "v", false},
		{"a kind of another wire type: unknown to proto", metadataOf(structOf(entryBytes("k", wrongType))), "k", "", false},
		{"typed metadata beside", anyMD, "k", "typed beside", false},
		{"invalid UTF-8 in a value", metadataOf(structOf(entryBytes("k", stringValue("\xff")))), "k", "", true},
		{"invalid UTF-8 in a key", metadataOf(structOf(entryBytes("\xff", stringValue("v")))), "k", "", true},
		{"truncated", metadataOf(structOf(entryBytes("k", stringValue("v"))))[:9], "k", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.md)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse: %v, want error %v", err, tc.wantErr)
			}
			var pm corev3.Metadata
			if perr := proto.Unmarshal(tc.md, &pm); (perr != nil) != tc.wantErr {
				t.Fatalf("the case is wrong: proto says %v", perr)
			}
			if err != nil {
				return
			}
			s, _ := m.Namespace(ns)
			got, _ := s.Field(tc.key).String()
			if got != tc.want {
				t.Errorf("%s = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
	// Merged struct values: both halves.
	m := mustParse(t, metadataOf(structOf(entryBytes("k", mergedStruct))))
	s, _ := m.Namespace(ns)
	inner, ok := s.Field("k").Struct()
	if !ok {
		t.Fatal("merged struct value missing")
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if got, _ := inner.Field(k).String(); got != want {
			t.Errorf("merged %s = %q, want %q", k, got, want)
		}
	}
}

// TestDecode: a parsed namespace decodes whole to what was encoded.
func TestDecode(t *testing.T) {
	md := jwtMetadata(t)
	s, _ := mustParse(t, encode(t, md)).Namespace(ns)
	d, err := s.Decode()
	if err != nil || !proto.Equal(d, md.GetFilterMetadata()[ns]) {
		t.Errorf("Decode = %v, %v; want %v", d, err, md.GetFilterMetadata()[ns])
	}
}

// FuzzParse: for any bytes, Parse fails exactly when proto.Unmarshal does,
// and every namespace reads as proto decodes it (each field, each kind,
// each list item), and a key proto does not have reads as absent.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, jwtMetadata(f)), "sub")
	f.Add(metadataOf(structOf(entryBytes("k", append(stringValue("a"), stringValue("b")...)))), "k")
	f.Add(append(metadataOf(structOf(entryBytes("k", stringValue("x")))), metadataOf(nil)...), "k")
	f.Fuzz(func(t *testing.T, b []byte, probe string) {
		var pm corev3.Metadata
		perr := proto.Unmarshal(b, &pm)
		m, err := Parse(b)
		if (err != nil) != (perr != nil) {
			t.Fatalf("Parse: %v; proto: %v", err, perr)
		}
		if err != nil {
			return
		}
		for name, ps := range pm.GetFilterMetadata() {
			s, ok := m.Namespace(name)
			if !ok {
				t.Fatalf("namespace %q missing", name)
			}
			compareStruct(t, s, ps, 0)
			if _, in := ps.GetFields()[probe]; !in && s.Field(probe) != nil {
				t.Fatalf("namespace %q: %q read as present", name, probe)
			}
		}
		if _, in := pm.GetFilterMetadata()[probe]; !in {
			if _, ok := m.Namespace(probe); ok {
				t.Fatalf("namespace %q read as present", probe)
			}
		}
	})
}

func compareStruct(t *testing.T, s Struct, ps *structpb.Struct, depth int) {
	t.Helper()
	for k, pv := range ps.GetFields() {
		v := s.Field(k)
		if v == nil {
			t.Fatalf("field %q missing", k)
		}
		compareValue(t, v, pv, depth+1)
	}
}

func compareValue(t *testing.T, v Value, pv *structpb.Value, depth int) {
	t.Helper()
	switch k := pv.GetKind().(type) {
	case nil:
		if v.Kind() != KindNone {
			t.Fatalf("kind %d, want none", v.Kind())
		}
	case *structpb.Value_NullValue:
		if v.Kind() != KindNull {
			t.Fatalf("kind %d, want null", v.Kind())
		}
	case *structpb.Value_NumberValue:
		if f, ok := v.Number(); !ok || math.Float64bits(f) != math.Float64bits(k.NumberValue) {
			t.Fatalf("number %v, %v; want %v", f, ok, k.NumberValue)
		}
	case *structpb.Value_StringValue:
		if s, ok := v.String(); !ok || s != k.StringValue {
			t.Fatalf("string %q, %v; want %q", s, ok, k.StringValue)
		}
	case *structpb.Value_BoolValue:
		if b, ok := v.Bool(); !ok || b != k.BoolValue {
			t.Fatalf("bool %v, %v; want %v", b, ok, k.BoolValue)
		}
	case *structpb.Value_StructValue:
		s, ok := v.Struct()
		if !ok {
			t.Fatalf("kind %d, want struct", v.Kind())
		}
		compareStruct(t, s, k.StructValue, depth)
	case *structpb.Value_ListValue:
		items, ok := v.List()
		if !ok || len(items) != len(k.ListValue.GetValues()) {
			t.Fatalf("list of %d, %v; want %d", len(items), ok, len(k.ListValue.GetValues()))
		}
		for i, item := range items {
			compareValue(t, item, k.ListValue.GetValues()[i], depth+1)
		}
	}
}

// BenchmarkRead: what the sidecar does with a 12-claim JWT payload per
// request (check it, read the subject and the roles), against decoding it.
//
//	go test -run '^$' -bench Read -benchmem ./pkg/structwire
func BenchmarkRead(b *testing.B) {
	enc := encode(b, jwtMetadata(b))
	b.Run("structwire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := Parse(enc)
			if err != nil {
				b.Fatal(err)
			}
			s, _ := m.Namespace(ns)
			p, _ := s.Field("jwt_payload").Struct()
			if sub, _ := p.Field("sub").String(); sub != "alice" {
				b.Fatal(sub)
			}
			if roles, _ := p.Path([]string{"realm_access", "roles"}).List(); len(roles) != 3 {
				b.Fatal(roles)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var md corev3.Metadata
			if err := proto.Unmarshal(enc, &md); err != nil {
				b.Fatal(err)
			}
			p := md.GetFilterMetadata()[ns].GetFields()["jwt_payload"].GetStructValue()
			if p.GetFields()["sub"].GetStringValue() != "alice" {
				b.Fatal("sub")
			}
		}
	})
}

// TestMessageField: a message field's contents, merged when given twice,
// and nothing for a field of another wire type.
func TestMessageField(t *testing.T) {
	varint := protowire.AppendVarint(protowire.AppendTag(nil, 8, protowire.VarintType), 1)
	for _, tc := range []struct {
		name string
		b    []byte
		want []byte
	}{
		{"absent", fieldBytes(1, []byte("x")), nil},
		{"once", fieldBytes(8, []byte("ab")), []byte("ab")},
		{"twice: concatenated", append(fieldBytes(8, []byte("ab")), fieldBytes(8, []byte("cd"))...), []byte("abcd")},
		{"another wire type", varint, nil},
	} {
		got, err := MessageField(tc.b, 8)
		if err != nil || string(got) != string(tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := MessageField([]byte{0x42, 5}, 8); err == nil {
		t.Error("truncated: no error")
	}
}
