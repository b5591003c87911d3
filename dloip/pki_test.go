package dloip

import (
	"crypto/tls"
	"testing"

	"github.com/godlpack/dlpack/internal/testpki"
)

// pki is a CA and a server certificate for 127.0.0.1 and localhost, as
// TLS configs and as PEM (for the Python peers).
type pki struct {
	server, client         *tls.Config
	caPEM, certPEM, keyPEM []byte
}

func newPKI(t testing.TB) pki {
	t.Helper()
	p := testpki.New(t, "dloip")
	return pki{server: p.Server, client: p.Client, caPEM: p.CAPEM, certPEM: p.CertPEM, keyPEM: p.KeyPEM}
}
