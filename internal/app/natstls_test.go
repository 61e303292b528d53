package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestNATSRefusedCertificateIsOneHeldBackLine: a server that stops taking
// memoryd's client certificate (its CA changed, the certificate expired)
// fails every reconnect's handshake; each is logged as the TLS refusal,
// which the process's handler holds back to one every 30 s, not as a
// "nats error" (a rotation walk: one such line about every second), and
// the connection comes back once the server takes the certificate again.
func TestNATSRefusedCertificateIsOneHeldBackLine(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testCA(t, dir, "ca")
	testCA(t, dir, "other") // a CA that did not sign the client certificate
	testLeaf(t, dir, "server", ca, caKey, true)
	testLeaf(t, dir, "client", ca, caKey, false)
	conf := filepath.Join(dir, "nats.conf")
	trust := func(clientCA string) {
		t.Helper()
		text := fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }\n",
			filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, clientCA+".pem"))
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	trust("ca")
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-c", conf}
	})
	var logs eventstest.SyncBuffer
	nc, err := NATSConfig{
		URL: "tls://" + strings.TrimPrefix(srv.URL, "nats://"), CA: filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem"),
	}.Connect(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	trust("other")
	srv.Restart(t)
	eventstest.Eventually(t, "three refused handshakes", 20*time.Second, func() (bool, string) {
		n := strings.Count(logs.String(), MsgNATSTLSRefused)
		return n >= 3, fmt.Sprint(n, " refusals, ", nc.Status())
	})
	if strings.Contains(logs.String(), `msg="nats error"`) {
		t.Fatalf("a refused handshake logged as a plain nats error:\n%s", logs.String())
	}

	trust("ca")
	srv.Restart(t)
	eventstest.Eventually(t, "the connection back once the server takes the certificate", 20*time.Second, func() (bool, string) {
		return nc.IsConnected(), nc.Status().String()
	})
}

// testCA writes a self-signed CA certificate to dir/name.pem.
func testCA(t *testing.T, dir, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	return cert, key
}

// testLeaf writes a certificate signed by ca (for 127.0.0.1 when server)
// and its key to dir/name.pem and dir/name-key.pem.
func testLeaf(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tpl.SerialNumber = big.NewInt(3)
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kb)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
