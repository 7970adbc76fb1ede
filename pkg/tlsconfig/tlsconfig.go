// Package tlsconfig builds the client TLS configuration of a cpex tls:
// section, the one shape every TLS client of the sidecar is configured with
// (a plugin's mcp.tls and grpc.tls, the shared attribution store's
// redis.tls).
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// Client builds the client TLS configuration of a tls: section
// (docs/plugin-protocol.md §4):
//   - ca_bundle: PEM file of the CAs that verify the server (default: the
//     system roots);
//   - certfile/keyfile: the client certificate (mutual TLS); keyfile_password
//     decrypts a legacy encrypted PEM key ("Proc-Type: 4,ENCRYPTED");
//   - verify: false skips verification entirely (InsecureSkipVerify);
//   - check_hostname: false verifies the chain but not the host name.
func Client(t *config.TLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CABundle != "" {
		pemData, err := os.ReadFile(t.CABundle)
		if err != nil {
			return nil, fmt.Errorf("ca_bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("ca_bundle %s: no PEM certificates", t.CABundle)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := loadKeyPair(t.CertFile, t.KeyFile, t.KeyFilePassword)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("certfile and keyfile must be set together")
	}

	switch {
	case !t.VerifyEnabled():
		cfg.InsecureSkipVerify = true
	case !t.HostnameCheckEnabled():
		// Verify the chain ourselves, without the host name.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}

// loadKeyPair loads a PEM certificate and key; password, if set, decrypts a
// legacy encrypted PEM key.
func loadKeyPair(certFile, keyFile, password string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certfile: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("keyfile: %w", err)
	}
	if password != "" {
		block, _ := pem.Decode(keyPEM)
		if block == nil {
			return tls.Certificate{}, fmt.Errorf("keyfile %s: no PEM data", keyFile)
		}
		//nolint:staticcheck // Legacy PEM encryption is what keyfile_password means for PEM keys.
		if x509.IsEncryptedPEMBlock(block) {
			//nolint:staticcheck // See above.
			der, err := x509.DecryptPEMBlock(block, []byte(password))
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("keyfile %s: decrypt: %w", keyFile, err)
			}
			keyPEM = pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der})
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certfile/keyfile: %w", err)
	}
	return cert, nil
}
