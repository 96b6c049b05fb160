// Package certs turns the node's TLS files (--tls-cert-file, --tls-key-file,
// --tls-client-ca-file, --tls-ca-file) into crypto/tls configurations for every
// listener and every connection the node opens, and reloads the files when they
// change, without a restart.
//
// # Reloading
//
// A handshake (served or dialled) first checks whether CheckInterval has passed
// since the files were last read; if so it reads them again and, when their bytes
// differ, parses them. A parse failure (a key that does not match the new
// certificate because only one of them was replaced so far, say) keeps the
// previous material, logs a warning and is retried at the next check. Connections
// already open keep the certificate they were set up with, as in Kafka.
//
// # Principals
//
// PrincipalMapper maps a verified client certificate to a Kafka principal:
// "User:<subject common name>" by default, or the subject DN as Java prints it
// (DistinguishedName) rewritten by Kafka's ssl.principal.mapping.rules. A
// connection without a client certificate is "User:ANONYMOUS", as on Kafka's
// PLAINTEXT and SSL listeners.
package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// Anonymous is the principal of a connection that presented no identity.
const Anonymous = "User:ANONYMOUS"

// DefaultCheckInterval is how often the files are looked at for changes.
const DefaultCheckInterval = time.Second

// Files names the PEM files. CertFile and KeyFile are required.
type Files struct {
	CertFile string // this node's certificate chain
	KeyFile  string // its private key
	// ClientCAFile, when set, makes every listener require a client certificate
	// signed by one of its CAs (mTLS).
	ClientCAFile string
	// CAFile holds the CAs this node trusts when it connects to other nodes
	// (brokers, controllers). Empty: ClientCAFile if set, else the system roots.
	CAFile string
}

// Reloader holds the current TLS material and hands out configurations that
// always use it. It is safe for concurrent use.
type Reloader struct {
	files         Files
	log           *slog.Logger
	checkInterval time.Duration
	mu            struct {
		sync.Mutex
		raw       [4][]byte // the file bytes last read: cert, key, client CA, CA
		cur       *material
		lastCheck time.Time
	}
}

// material is one parsed generation of the files.
type material struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool // nil: no client certificates asked for
	roots     *x509.CertPool // nil: the system roots
}

// New reads and parses the files; it fails when they cannot be used. A zero
// checkInterval means DefaultCheckInterval.
func New(files Files, checkInterval time.Duration, logger *slog.Logger) (*Reloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("certs: a certificate file and a key file are both required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if checkInterval <= 0 {
		checkInterval = DefaultCheckInterval
	}
	r := &Reloader{files: files, log: logger, checkInterval: checkInterval}
	raw, err := r.read()
	if err != nil {
		return nil, err
	}
	m, err := r.parse(raw)
	if err != nil {
		return nil, err
	}
	r.mu.raw, r.mu.cur, r.mu.lastCheck = raw, m, time.Now()
	return r, nil
}

// MutualTLS reports whether client certificates are required.
func (r *Reloader) MutualTLS() bool { return r.files.ClientCAFile != "" }

// read reads every configured file.
func (r *Reloader) read() ([4][]byte, error) {
	var raw [4][]byte
	for i, path := range []string{r.files.CertFile, r.files.KeyFile, r.files.ClientCAFile, r.files.CAFile} {
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return raw, fmt.Errorf("certs: %w", err)
		}
		raw[i] = b
	}
	return raw, nil
}

// parse builds material from file bytes.
func (r *Reloader) parse(raw [4][]byte) (*material, error) {
	cert, err := tls.X509KeyPair(raw[0], raw[1])
	if err != nil {
		return nil, fmt.Errorf("certs: %s and %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	m := &material{cert: &cert}
	if raw[2] != nil {
		if m.clientCAs, err = pool(r.files.ClientCAFile, raw[2]); err != nil {
			return nil, err
		}
	}
	switch {
	case raw[3] != nil:
		if m.roots, err = pool(r.files.CAFile, raw[3]); err != nil {
			return nil, err
		}
	case m.clientCAs != nil:
		m.roots = m.clientCAs
	}
	return m, nil
}

func pool(path string, pemBytes []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", path)
	}
	return p, nil
}

// current returns the material, reloading the files first when CheckInterval
// has passed and they changed.
func (r *Reloader) current() *material {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.mu.lastCheck) < r.checkInterval {
		return r.mu.cur
	}
	r.mu.lastCheck = time.Now()
	raw, err := r.read()
	if err != nil {
		r.log.Warn("certs: reading TLS files failed; keeping the loaded ones", "err", err)
		return r.mu.cur
	}
	if sameBytes(raw, r.mu.raw) {
		return r.mu.cur
	}
	m, err := r.parse(raw)
	if err != nil {
		r.log.Warn("certs: TLS files changed but cannot be used; keeping the loaded ones", "err", err)
		return r.mu.cur
	}
	r.mu.raw, r.mu.cur = raw, m
	r.log.Info("certs: TLS files reloaded", "cert_file", r.files.CertFile)
	return m
}

func sameBytes(a, b [4][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// ServerConfig is the configuration for a listener: the current certificate and,
// with a client CA file, client certificates required and verified.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
			if m.clientCAs != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = m.clientCAs
			}
			return c, nil
		},
	}
}

// ClientConfig is the configuration for connections this node opens to other
// nodes: the server is verified against the current CAs (its name taken from
// ServerName, or from the dialled host when the caller sets it), and this node's
// certificate is presented when the server asks for one.
func (r *Reloader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is done in VerifyConnection against the CAs current at
		// handshake time, so a reloaded CA file applies without a restart.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, r.current().roots)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.current().cert, nil
		},
	}
}

// verifyServer checks the server's chain against roots (nil: the system roots)
// and its name against cs.ServerName.
func verifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("certs: the server presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// DialConfig is ClientConfig with ServerName set to the host of addr, for
// dialers that do not set it themselves.
func (r *Reloader) DialConfig(addr string) *tls.Config {
	c := r.ClientConfig()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c.ServerName = host
	return c
}
