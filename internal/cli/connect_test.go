package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()
	ctx := context.Background()

	if err := Probe(ctx, Options{Brokers: []string{dead, ln.Addr().String()}, Timeout: time.Second}); err != nil {
		t.Fatalf("one live broker: %v", err)
	}
	err = Probe(ctx, Options{Brokers: []string{dead}, Timeout: time.Second})
	var nb *NoBrokerError
	if !errors.As(err, &nb) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("no broker: %v", err)
	}
	if want := `no broker at ` + dead + `: is "strata server" running?`; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// A host that does not resolve is not a server that is down: say what failed.
	err = Probe(ctx, Options{Brokers: []string{"nohost.invalid:9092"}, Timeout: time.Second})
	var dnsErr *net.DNSError
	if !errors.As(err, &nb) || !errors.As(err, &dnsErr) {
		t.Fatalf("unresolvable broker: %v", err)
	}
	if want := `no broker at nohost.invalid:9092: cannot resolve host "nohost.invalid"`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q, want it to start with %q", err, want)
	}
	if _, err := Connect(ctx, Options{Brokers: []string{dead}, Timeout: time.Second}); !errors.As(err, &nb) {
		t.Fatalf("Connect to no broker: %v", err)
	}
}

func TestExplain(t *testing.T) {
	o := Options{Brokers: []string{"h:1"}, Timeout: 3 * time.Second}
	err := Explain(context.DeadlineExceeded, o)
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "no answer from h:1 within 3s (see --timeout): context deadline exceeded" {
		t.Fatalf("%v", err)
	}
	other := errors.New("x")
	if Explain(other, o) != other || Explain(nil, o) != nil {
		t.Fatal("Explain changed an error it should leave alone")
	}
}
