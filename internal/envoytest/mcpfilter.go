package envoytest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Envoy's MCP filter (envoy.filters.http.mcp, source/extensions/filters/http/mcp),
// placed before ext_proc, as the Proxy plays it when Proxy.MCPFilter is set:
//   - only a POST with a JSON content type and an Accept naming both
//     application/json and text/event-stream (or */*) is read; anything
//     else passes untouched;
//   - the filter holds the request headers (StopIteration) until it has
//     read the body, so the filters after it, ext_proc among them, see the
//     headers only after its dynamic metadata is set;
//   - it parses at most MaxRequestBodyBytes (8 KiB by default) of the root
//     object, with the last of duplicate keys winning, arrays skipped, and
//     writes jsonrpc, method, id, params.name (tools/call, prompts/get) or
//     params.uri (resources/read), is_mcp_request, and is_exceeding_limit
//     when the body was longer;
//   - it lowers the stream's buffer limit to MaxRequestBodyBytes
//     (decoder_callbacks->setBufferLimit): an ext_proc BUFFERED request
//     body over it is then a 413, a trap of real deployments.
//
// Its traffic mode is PASS_THROUGH: a body that is JSON but not a JSON-RPC
// request passes with is_mcp_request false (a root array: with no
// metadata); a body that is not JSON, or ends inside its root value, is
// answered 400 "not a valid JSON" by the filter, before ext_proc sees it.

// MCPFilter configures the Proxy's Envoy MCP filter.
type MCPFilter struct {
	// Namespace is its dynamic metadata namespace: "envoy.filters.http.mcp"
	// (runtime feature mcp_filter_use_new_metadata_namespace) or the legacy
	// "mcp_proxy". Empty: "envoy.filters.http.mcp".
	Namespace string
	// MaxRequestBodyBytes is max_request_body_size; 0: 8192.
	MaxRequestBodyBytes int
}

// MCPFilterNamespace is the namespace of Envoy's MCP filter metadata
// (with the runtime feature that names it after the filter).
const MCPFilterNamespace = "envoy.filters.http.mcp"

func (f *MCPFilter) namespace() string {
	if f.Namespace == "" {
		return MCPFilterNamespace
	}
	return f.Namespace
}

func (f *MCPFilter) limit() int {
	if f.MaxRequestBodyBytes <= 0 {
		return 8192
	}
	return f.MaxRequestBodyBytes
}

// errInvalidJSON is the filter's local reply to a body it cannot parse.
var errInvalidJSON = errors.New("not a valid JSON")

// apply plays the filter on d: for an MCP POST it reads the body, adds the
// metadata to d.info and lowers d's buffer limit. errInvalidJSON: the
// filter answers 400 itself.
func (f *MCPFilter) apply(r *http.Request, d *downstreamRequest) error {
	if !isMCPPost(r) || !d.hasBody {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	d.body = &readerSource{r: bytes.NewReader(body)}
	d.bufferLimit = f.limit()
	meta, invalid := MCPFilterMetadata(body, f.limit())
	if invalid {
		return errInvalidJSON
	}
	if meta == nil {
		return nil
	}
	info := &StreamInfo{DynamicMetadata: map[string]*structpb.Struct{}}
	if d.info != nil {
		info.Attributes = d.info.Attributes
		for ns, s := range d.info.DynamicMetadata {
			info.DynamicMetadata[ns] = s
		}
	}
	info.DynamicMetadata[f.namespace()] = meta
	d.info = info
	return nil
}

// isMCPPost is the filter's isValidMcpPostRequest.
func isMCPPost(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if r.Method != http.MethodPost || !strings.HasPrefix(ct, "application/json") ||
		len(ct) > len("application/json") && ct[len("application/json")] != ';' && ct[len("application/json")] != ' ' {
		return false
	}
	sse, js := false, false
	for _, a := range r.Header.Values("Accept") {
		star := strings.Contains(a, "*/*")
		sse = sse || star || strings.Contains(a, "text/event-stream")
		js = js || star || strings.Contains(a, "application/json")
	}
	return sse && js
}

// MCPFilterMetadata is the dynamic metadata Envoy's MCP filter writes for
// body, reading at most limit bytes of it: nil when it writes none (a root
// array), invalid when it answers 400 instead (not JSON, or cut short
// within the limit). Tests that send ext_proc messages themselves use it
// to play the filter.
func MCPFilterMetadata(body []byte, limit int) (meta *structpb.Struct, invalid bool) {
	read := body
	exceeding := len(body) > limit
	if exceeding {
		read = body[:limit]
	}
	s := mcpScan{fields: map[string]*structpb.Value{}}
	switch err := s.scan(read); {
	case errors.Is(err, errNotObject):
		return nil, false
	case err != nil && !exceeding:
		return nil, true
	}
	if len(s.fields) == 0 && s.params == nil {
		return nil, false
	}
	if p := s.paramFor(); p != "" {
		if v, ok := s.params[p]; ok {
			s.fields["params"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{p: v}})
		}
	}
	s.fields["is_mcp_request"] = structpb.NewBoolValue(s.jsonrpc && s.method != "")
	if exceeding {
		s.fields["is_exceeding_limit"] = structpb.NewBoolValue(true)
	}
	return &structpb.Struct{Fields: s.fields}, false
}

// mcpScan walks a root object the way the filter's field extractor does.
type mcpScan struct {
	fields  map[string]*structpb.Value
	params  map[string]*structpb.Value
	method  string
	jsonrpc bool
}

var errNotObject = errors.New("root is not an object")

func (s *mcpScan) scan(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return errNotObject
	}
	return eachMember(dec, func(name string) error { return s.member(dec, name) })
}

// eachMember calls fn with the name of each member of the object whose
// '{' was read, fn reading the value, until the object's end.
func eachMember(dec *jsontext.Decoder, fn func(name string) error) error {
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() == '}' {
			return nil
		}
		if err := fn(tok.String()); err != nil {
			return err
		}
	}
}

// member reads the value of the top-level member name.
func (s *mcpScan) member(dec *jsontext.Decoder, name string) error {
	if name == "params" && dec.PeekKind() == '{' {
		return s.readParams(dec)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case '"':
		v := tok.String()
		switch name {
		case "jsonrpc":
			s.jsonrpc = v == "2.0"
			s.fields[name] = structpb.NewStringValue(v)
		case "method":
			s.method = v // the last one wins, as in the filter
			s.fields[name] = structpb.NewStringValue(v)
		case "id":
			s.fields[name] = structpb.NewStringValue(v)
		}
	case '0':
		if f, err := tok.Float(); err == nil && name == "id" {
			s.fields[name] = structpb.NewNumberValue(f)
		}
	case '{', '[':
		return skipRest(dec)
	}
	return nil
}

// readParams keeps params' string members.
func (s *mcpScan) readParams(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != nil { // {
		return err
	}
	s.params = map[string]*structpb.Value{}
	return eachMember(dec, func(name string) error {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch tok.Kind() {
		case '"':
			s.params[name] = structpb.NewStringValue(tok.String())
		case '{', '[':
			return skipRest(dec)
		}
		return nil
	})
}

// skipRest skips the rest of the object or array whose start was read.
func skipRest(dec *jsontext.Decoder) error {
	depth := 1
	for depth > 0 {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch tok.Kind() {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return nil
}

// paramFor is the params member the filter extracts for the method.
func (s *mcpScan) paramFor() string {
	switch s.method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return "uri"
	}
	return ""
}
