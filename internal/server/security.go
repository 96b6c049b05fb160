package server

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/certs"
)

// loadTLS reads the TLS files when TLS is configured; n.certs stays nil otherwise.
func (n *Node) loadTLS() error {
	if n.cfg.TLSCertFile == "" {
		return nil
	}
	r, err := certs.New(certs.Files{
		CertFile: n.cfg.TLSCertFile, KeyFile: n.cfg.TLSKeyFile,
		ClientCAFile: n.cfg.TLSClientCAFile, CAFile: n.cfg.TLSCAFile,
	}, 0, n.log.With("component", "tls"))
	if err != nil {
		return err
	}
	n.certs = r
	return nil
}

// listen opens a TCP listener on addr, a TLS one when TLS is on.
func (n *Node) listen(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	if n.certs != nil {
		ln = tls.NewListener(ln, n.certs.ServerConfig())
	}
	return ln, nil
}

// dialTLS gives the TLS configuration for dialling another node's controller
// listener, or nil when TLS is off.
func (n *Node) dialTLS() func(addr string) *tls.Config {
	if n.certs == nil {
		return nil
	}
	return n.certs.DialConfig
}

// kafkaClientOpts are the options this node's own Kafka clients (the replica
// fetchers) need to reach other brokers' Kafka listeners.
func (n *Node) kafkaClientOpts() []kgo.Opt {
	if n.certs == nil {
		return nil
	}
	return []kgo.Opt{kgo.DialTLSConfig(n.certs.ClientConfig())}
}
