package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// BrokersEnv names the environment variable that overrides DefaultBrokers.
const BrokersEnv = "STRATA_BROKERS"

// DefaultBrokers is where the client commands look for a broker by default: what
// "strata server" listens on with no flags.
const DefaultBrokers = "127.0.0.1:9092"

// Options say where the brokers are and how long to wait for them.
type Options struct {
	Brokers []string      // seed brokers, host:port
	Timeout time.Duration // bound on reaching the brokers and on each admin operation
	TLS     *tls.Config   // nil: plaintext
	SASL    kgo.Opt       // nil: no SASL
}

// ClientOpts are the kgo options every client of these Options needs (TLS, SASL).
// TLS connections read large responses ahead (protocol.TLSDialer).
func (o Options) ClientOpts() []kgo.Opt {
	var opts []kgo.Opt
	if o.TLS != nil {
		opts = append(opts, kgo.Dialer(protocol.TLSDialer(o.TLS, net.Dialer{Timeout: o.dialTimeout()})))
	}
	if o.SASL != nil {
		opts = append(opts, o.SASL)
	}
	return opts
}

// ParseBrokers splits a comma-separated broker list, checking each is host:port.
func ParseBrokers(s string) ([]string, error) {
	var out []string
	for b := range strings.SplitSeq(s, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return nil, Usagef("--brokers: %q is not host:port", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, Usagef("--brokers: no broker given")
	}
	return out, nil
}

// NoBrokerError says that no seed broker accepted a connection. Its message names
// the cause of the last dial when it is not a refused connection (a host that does
// not resolve, a timeout), which "is the server running?" would hide.
type NoBrokerError struct {
	Brokers []string
	Err     error // the last dial error
}

func (e *NoBrokerError) Error() string {
	at := "no broker at " + strings.Join(e.Brokers, ",")
	var dnsErr *net.DNSError
	switch {
	case errors.As(e.Err, &dnsErr):
		return fmt.Sprintf("%s: cannot resolve host %q (%s)", at, dnsErr.Name, dnsErr.Err)
	case e.Err == nil || errors.Is(e.Err, syscall.ECONNREFUSED):
		return at + `: is "strata server" running?`
	}
	return fmt.Sprintf("%s: is \"strata server\" running? (%v)", at, e.Err)
}

func (e *NoBrokerError) Unwrap() error { return e.Err }

// maxProbe bounds one dial of the reachability probe.
const maxProbe = 5 * time.Second

// dialTimeout bounds one dial (and TLS handshake) of a client of these Options.
func (o Options) dialTimeout() time.Duration {
	if o.Timeout <= 0 {
		return maxProbe
	}
	return min(o.Timeout, maxProbe)
}

// Probe dials the seed brokers in turn and returns nil as soon as one accepts a TCP
// connection, or a *NoBrokerError. It exists so that a missing server is reported
// at once, in words, instead of after the client's retries run out.
func Probe(ctx context.Context, o Options) error {
	d := net.Dialer{Timeout: o.dialTimeout()}
	var last error
	for _, b := range o.Brokers {
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			c.Close()
			return nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return &NoBrokerError{Brokers: o.Brokers, Err: last}
}

// Connect probes the brokers and returns a client seeded with them. Extra options
// (producer or consumer settings) are applied after the defaults.
func Connect(ctx context.Context, o Options, extra ...kgo.Opt) (*kgo.Client, error) {
	if err := Probe(ctx, o); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID("strata-cli"),
		kgo.DialTimeout(o.dialTimeout()),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if o.Timeout > 0 {
		opts = append(opts, kgo.RetryTimeout(o.Timeout))
	}
	opts = append(opts, o.ClientOpts()...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, Usage(err)
	}
	return cl, nil
}

// Explain rewrites errors a user cannot act on into ones they can: a deadline that
// passed becomes a hint about --timeout.
func Explain(err error, o Options) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer from %s within %s (see --timeout): %w", strings.Join(o.Brokers, ","), o.Timeout, err)
	}
	return err
}

// UnsupportedError says that a broker does not serve a Kafka API a command needs.
type UnsupportedError struct {
	Broker int32
	Key    int16
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("broker %d does not serve %s (API key %d), which this command needs",
		e.Broker, kmsg.NameForKey(e.Key), e.Key)
}

// RequireAPIs checks that every broker serves the given API keys, so that a command
// fails up front with an *UnsupportedError instead of with a client library's
// generic complaint.
func RequireAPIs(ctx context.Context, adm *kadm.Client, keys ...int16) error {
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return err
	}
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("broker %d: %w", v.NodeID, v.Err)
		}
		for _, k := range keys {
			if _, _, ok := v.KeyVersions(k); !ok {
				return &UnsupportedError{Broker: v.NodeID, Key: k}
			}
		}
	}
	return nil
}
