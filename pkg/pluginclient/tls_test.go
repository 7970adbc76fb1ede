package pluginclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for the given names (IPs or DNS names).
func (ca *testCA) issue(t *testing.T, client bool, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "leaf"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, name string, blocks ...*pem.Block) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	var data []byte
	for _, b := range blocks {
		data = append(data, pem.EncodeToMemory(b)...)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	ca := newCA(t, "plugin CA")
	otherCA := newCA(t, "other CA")
	caFile := writePEM(t, "ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	otherCAFile := writePEM(t, "other.pem", &pem.Block{Type: "CERTIFICATE", Bytes: otherCA.cert.Raw})

	clientCert := ca.issue(t, true, "client")
	keyDER, err := x509.MarshalECPrivateKey(clientCert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile := writePEM(t, "client.pem", &pem.Block{Type: "CERTIFICATE", Bytes: clientCert.Certificate[0]})
	keyFile := writePEM(t, "client.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	//nolint:staticcheck // Legacy encrypted PEM is what keyfile_password decrypts.
	encBlock, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", keyDER, []byte("s3cret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	encKeyFile := writePEM(t, "client-enc.key", encBlock)

	start := func(t *testing.T, cert tls.Certificate, mtls bool) string {
		t.Helper()
		ps := pluginserver.New(plugintest.NewScripted("guard"), plugintest.NewScripted("guard2"))
		mux := http.NewServeMux()
		mux.Handle("/mcp", ps.Handler())
		srv := httptest.NewUnstartedServer(mux)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		if mtls {
			pool := x509.NewCertPool()
			pool.AddCert(ca.cert)
			srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
			srv.TLS.ClientCAs = pool
		}
		srv.StartTLS()
		t.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
			_ = ps.Close()
		})
		return srv.URL + "/mcp"
	}
	ipCert := ca.issue(t, false, "127.0.0.1")
	dnsCert := ca.issue(t, false, "plugin.example") // does not match 127.0.0.1

	tests := []struct {
		name      string
		cert      tls.Certificate
		mtls      bool
		tls       *config.TLS
		wantReady bool
	}{
		{"ca_bundle", ipCert, false, &config.TLS{CABundle: caFile}, true},
		{"system roots reject", ipCert, false, &config.TLS{}, false},
		{"wrong ca", ipCert, false, &config.TLS{CABundle: otherCAFile}, false},
		{"verify false", ipCert, false, &config.TLS{Verify: ptr(false)}, true},
		{"hostname mismatch", dnsCert, false, &config.TLS{CABundle: caFile}, false},
		{"check_hostname false", dnsCert, false, &config.TLS{CABundle: caFile, CheckHostname: ptr(false)}, true},
		{"check_hostname false still checks the chain", dnsCert, false, &config.TLS{CABundle: otherCAFile, CheckHostname: ptr(false)}, false},
		{"mtls", ipCert, true, &config.TLS{CABundle: caFile, CertFile: certFile, KeyFile: keyFile}, true},
		{"mtls without client cert", ipCert, true, &config.TLS{CABundle: caFile}, false},
		{"mtls encrypted key", ipCert, true, &config.TLS{CABundle: caFile, CertFile: certFile, KeyFile: encKeyFile, KeyFilePassword: "s3cret"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := external("guard", start(t, tt.cert, tt.mtls))
			pl.MCP.TLS = tt.tls
			pl.MCP.ReconnectAttempts = ptr(1)
			pool := newPool(t, []config.Plugin{pl}, Options{})
			eventually(t, "connected or down", func() bool { return pool.State("guard") != Connecting })
			if got := pool.State("guard") == Ready; got != tt.wantReady {
				t.Fatalf("ready = %v, want %v", got, tt.wantReady)
			}
			if tt.wantReady {
				mustInvoke(t, pool, "guard")
			}
		})
	}

	// Plugins with and without mcp.tls in one pool do not share TLS
	// settings: an https plugin without a tls section uses the system roots.
	t.Run("mixed pool", func(t *testing.T) {
		url := start(t, ipCert, false)
		secure := external("guard", url)
		secure.MCP.TLS = &config.TLS{CABundle: caFile}
		untrusted := external("guard2", url)
		untrusted.MCP.ReconnectAttempts = ptr(1)
		srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("plain"))
		pool := newPool(t, []config.Plugin{secure, external("plain", srv.URL()), untrusted}, Options{})
		mustInvoke(t, pool, "guard")
		mustInvoke(t, pool, "plain")
		eventually(t, "guard2 down", func() bool { return pool.State("guard2") == Down })
		_, err := invoke(pool, "guard2")
		if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("guard2: %v, want a certificate error", err)
		}
	})

	pl := external("guard", "https://127.0.0.1:1/mcp")
	pl.MCP.TLS = &config.TLS{CertFile: certFile, KeyFile: encKeyFile, KeyFilePassword: "wrong"}
	if _, err := NewPool([]config.Plugin{pl}, config.PluginSettings{}, Options{}); err == nil {
		t.Error("wrong keyfile_password accepted")
	}
}
