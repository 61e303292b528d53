package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/certtest"
)

// TestNATSRefusedCertificateIsOneHeldBackLine: a server that stops taking
// memoryd's client certificate (its CA changed, the certificate expired)
// fails every reconnect's handshake; each is logged as the TLS refusal,
// which the process's handler holds back to one every 30 s, not as a
// "nats error" (a rotation walk: one such line about every second), and
// the connection comes back once the server takes the certificate again.
func TestNATSRefusedCertificateIsOneHeldBackLine(t *testing.T) {
	t.Parallel() // a nats-server, certificates and a connection of its own
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	other := certtest.NewCA(t, dir, "other") // did not sign the client certificate
	serverCert, serverKey := ca.Issue(t, dir, "server", true)
	clientCert, clientKey := ca.Issue(t, dir, "client", false)
	conf := filepath.Join(dir, "nats.conf")
	trust := func(clientCA *certtest.CA) {
		t.Helper()
		text := fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }\n", serverCert, serverKey, clientCA.File)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	trust(ca)
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-c", conf}
	})
	var logs eventstest.SyncBuffer
	nc, err := NATSConfig{
		URL: "tls://" + strings.TrimPrefix(srv.URL, "nats://"), CA: ca.File, Cert: clientCert, Key: clientKey,
	}.Connect(slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	trust(other)
	srv.Restart(t)
	eventstest.Eventually(t, "three refused handshakes", 20*time.Second, func() (bool, string) {
		n := strings.Count(logs.String(), MsgNATSTLSRefused)
		return n >= 3, fmt.Sprint(n, " refusals, ", nc.Status())
	})
	if strings.Contains(logs.String(), `msg="nats error"`) {
		t.Fatalf("a refused handshake logged as a plain nats error:\n%s", logs.String())
	}

	trust(ca)
	srv.Restart(t)
	eventstest.Eventually(t, "the connection back once the server takes the certificate", 20*time.Second, func() (bool, string) {
		return nc.IsConnected(), nc.Status().String()
	})
}

// TestNATSUntrustedServerCertificateSaysWhy: a server whose certificate
// memoryd does not trust (renewed by another CA, or expired) fails every
// reconnect's handshake, which nats.go reports to no handler: /readyz's
// nats check says why, not only "not connected: RECONNECTING" (a review:
// nothing in the log or /readyz named the certificate).
func TestNATSUntrustedServerCertificateSaysWhy(t *testing.T) {
	t.Parallel() // a nats-server, certificates and a connection of its own
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	other := certtest.NewCA(t, dir, "other") // memoryd does not trust it
	conf := filepath.Join(dir, "nats.conf")
	serve := func(ca *certtest.CA, name string) {
		t.Helper()
		cert, key := ca.Issue(t, dir, name, true)
		if err := os.WriteFile(conf, []byte(fmt.Sprintf("tls { cert_file: %q, key_file: %q }\n", cert, key)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	serve(ca, "server")
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-c", conf}
	})
	nc, err := NATSConfig{URL: "tls://" + strings.TrimPrefix(srv.URL, "nats://"), CA: ca.File}.Connect(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	serve(other, "renewed")
	srv.Restart(t)
	eventstest.Eventually(t, "the nats check naming the certificate", 20*time.Second, func() (bool, string) {
		s := notConnected(nc)
		return !nc.IsConnected() && strings.Contains(s, "certificate"), s
	})
}
