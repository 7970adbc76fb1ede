package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is an HTTP reverse proxy that behaves like Envoy with the ext_proc
// filter in front of the router and one upstream cluster. It reads the
// downstream request, runs it through the same state machine as
// [Filter.Do], forwards the mutated request to Upstream and passes the
// response back through the filter. Response chunks are written and flushed
// as they come out of the filter, so server-sent events are not buffered
// (unless the processor asks for BUFFERED). A reset, as Envoy would do it,
// aborts the connection (http.ErrAbortHandler).
type Proxy struct {
	// Filter is the ext_proc filter configuration.
	Filter Filter
	// Upstream is the cluster's base URL; the request path is appended to
	// its path. The request's :authority is forwarded as Host.
	Upstream *url.URL
	// Transport reaches the upstream. Nil means a private http.Transport
	// without transparent gzip (which would hide the real body from the
	// processor); release its idle connections with CloseIdleConnections.
	Transport http.RoundTripper
	// Observe, when set, is called with every exchange's result, and the
	// error that stopped its simulation if any, before ServeHTTP returns.
	Observe func(*Result, error)
	// Info, when set, is what the filters before ext_proc learned of a
	// request (jwt_authn's verified payload, the mTLS peer): called with
	// the client's request, as those filters see it. It plays their part
	// only: a test that wants a forged header believed must make Info
	// believe it.
	Info func(*http.Request) *StreamInfo
	// MCPFilter, when set, plays Envoy's MCP filter before ext_proc
	// (mcpfilter.go): its metadata is sent when Filter.Forwarding forwards
	// its namespace.
	MCPFilter *MCPFilter

	once sync.Once
	tr   *http.Transport
}

func (p *Proxy) init() {
	if p.Transport == nil {
		p.tr = &http.Transport{
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		}
	}
}

func (p *Proxy) transport() http.RoundTripper {
	p.once.Do(p.init)
	if p.Transport != nil {
		return p.Transport
	}
	return p.tr
}

// CloseIdleConnections closes the idle upstream connections of the default
// transport.
func (p *Proxy) CloseIdleConnections() {
	p.once.Do(p.init)
	if p.tr != nil {
		p.tr.CloseIdleConnections()
	}
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.RequestURI
	if path == "" || path == "*" {
		path = r.URL.RequestURI()
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	d := &downstreamRequest{
		method:    r.Method,
		path:      path,
		authority: r.Host,
		scheme:    scheme,
		headers:   headersFromHTTP(withoutHopByHop(r.Header)),
		body:      &readerSource{r: r.Body},
		hasBody:   r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0,
		trailers:  func() headerList { return headersFromHTTP(r.Trailer) },
		info:      connectionInfo(r.RemoteAddr), // envoycontext.go
	}
	if p.Info != nil {
		d.info = p.Info(r)
	}
	if p.MCPFilter != nil {
		switch err := p.MCPFilter.apply(r, d); {
		case errors.Is(err, errInvalidJSON):
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case err != nil:
			panic(http.ErrAbortHandler) // the client's body broke off
		}
	}
	sink := &responseSink{w: w, rc: http.NewResponseController(w), declared: -1}
	res, err := p.Filter.run(r.Context(), d, p.roundTrip, sink)
	if p.Observe != nil {
		p.Observe(res, err)
	}
	var de *downstreamError
	switch {
	case err != nil && !sink.wrote && r.Context().Err() == nil && !errors.As(err, &de):
		http.Error(w, "envoytest: "+err.Error(), http.StatusInternalServerError)
	case err != nil, res != nil && res.Reset:
		panic(http.ErrAbortHandler)
	}
}

// roundTrip is the router and the upstream cluster.
func (p *Proxy) roundTrip(ctx context.Context, ur *UpstreamRequest) (*UpstreamResponse, error) {
	if p.Upstream == nil {
		return nil, fmt.Errorf("proxy: %w: nil Upstream", ErrInvalid)
	}
	ref, err := url.ParseRequestURI(ur.Path)
	if err != nil {
		return nil, fmt.Errorf("proxy: parse :path %q: %w", ur.Path, err)
	}
	u := *p.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + ref.Path
	u.RawPath = ""
	u.RawQuery = ref.RawQuery
	var body io.Reader = http.NoBody
	if len(ur.Body) > 0 {
		body = bytes.NewReader(ur.Body)
	}
	out, err := http.NewRequestWithContext(ctx, ur.Method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("proxy: new request: %w", err)
	}
	out.Host = ur.Authority
	out.Header = withoutHopByHop(ur.Headers)
	// Without content-length Envoy's codec sends the body chunked.
	if out.Header.Get("Content-Length") == "" && len(ur.Body) > 0 {
		out.ContentLength = -1
	}
	out.Header.Del("Content-Length")
	if len(ur.Trailers) > 0 {
		out.Trailer = ur.Trailers.Clone()
		out.ContentLength = -1
	}
	resp, err := p.transport().RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("proxy: round trip %s %s: %w", ur.Method, u.Redacted(), err)
	}
	up := &UpstreamResponse{Status: resp.StatusCode, Headers: withoutHopByHop(resp.Header), Trailers: resp.Trailer}
	if resp.Body == http.NoBody {
		_ = resp.Body.Close()
	} else {
		up.Reader = resp.Body
	}
	return up, nil
}

// hopByHop headers are not forwarded (RFC 9110 §7.6.1).
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func withoutHopByHop(h http.Header) http.Header {
	h = h.Clone()
	if h == nil {
		return http.Header{}
	}
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
	return h
}

// responseSink writes the client-visible response to an http.ResponseWriter,
// flushing every chunk.
type responseSink struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	wrote    bool
	declared int // content-length sent, or -1
	written  int
}

func (s *responseSink) writeHeader(code int, h http.Header) error {
	dst := s.w.Header()
	for k, v := range h {
		dst[k] = v
	}
	if v := h.Get("Content-Length"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			s.declared = n
		}
	}
	s.wrote = true
	s.w.WriteHeader(code)
	return s.flush()
}

func (s *responseSink) write(p []byte) error {
	// Bytes past a lying content-length would fail net/http's Write; the
	// exchange reports the mismatch and resets instead.
	if s.declared >= 0 {
		p = p[:max(0, min(len(p), s.declared-s.written))]
	}
	if len(p) == 0 {
		return nil
	}
	n, err := s.w.Write(p)
	s.written += n
	if err != nil {
		return err
	}
	return s.flush()
}

func (s *responseSink) writeTrailers(h http.Header) error {
	for k, v := range h {
		s.w.Header()[http.TrailerPrefix+k] = v
	}
	return nil
}

func (s *responseSink) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
