package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// TestEgressHTTPSPrivateEndpoint: an https private endpoint named by a
// host name is dialed at its checked IP yet reached with that name as TLS
// server name (the tollgate directive's HTTPS reverse_proxy):
// its certificate names only "localhost", so a handshake with any other
// name fails. The built gateway runs as a subprocess that trusts the
// test's certificate (SSL_CERT_FILE).
func TestEgressHTTPSPrivateEndpoint(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile)

	p := &process{gateway: freeport.Addr(t), admin: freeport.Addr(t), mock: freeport.Addr(t), dataDir: t.TempDir(), log: new(lockedBuffer)}
	// The TLS endpoint: records the server names it is reached with and
	// forwards to the gateway's mock provider.
	var mu sync.Mutex
	var names []string
	mock, _ := url.Parse("http://" + p.mock)
	fwd := httputil.NewSingleHostReverseProxy(mock)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names = append(names, r.TLS.ServerName)
		mu.Unlock()
		fwd.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")

	// The tollgate directive reaches HTTPS providers over TLS on its own.
	cfg := gatewayCaddyfile(p.admin, p.dataDir, p.gateway, p.mock, "1ms")
	p.config = filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)

	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "10")
	apiKey, _ := c.newKey(org.MgmtKey, `{"name":"tls"}`)
	id := c.api("POST", peBase, org.MgmtKey, `{"name":"tls","model":"acme/tls","base_url":"https://localhost:`+port+`/v1",
		"upstream_model":"tollgate-mock"}`).expect(t, 201).JSON.Get("data.id").Str
	v := c.api("POST", peBase+"/"+id+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if v.Get("status").Str != "validated" {
		t.Fatalf("probe over TLS: %s\n%s", v.Raw, p.log)
	}
	c.api("POST", peBase+"/"+id+"/activate", org.MgmtKey, nil).expect(t, 200)
	r := c.api("POST", "/chat/completions", apiKey, `{"model":"acme/tls","messages":[{"role":"user","content":"over tls"}]}`)
	if r.Status != 200 {
		t.Fatalf("request over TLS: %d %s\n%s", r.Status, r.Body, p.log)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 2 || names[0] != "localhost" || names[1] != "localhost" {
		t.Fatalf("server names %q, want the probe's and the request's: localhost", names)
	}
}
