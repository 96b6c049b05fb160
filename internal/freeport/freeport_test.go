package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreDistinctFreeAndBelowEphemeralRange(t *testing.T) {
	ports, err := Ports(20, "127.0.0.1", "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	limit := ephemeralStart()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowest || p >= limit {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, limit)
		}
		for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d is not free on %s: %v", p, host, err)
			}
			ln.Close()
		}
	}
}

// TestReservedPortsAreNotHandedOutAgain: a port this process handed out is never
// handed out again, by this process or another one, while it lives.
func TestReservedPortsAreNotHandedOutAgain(t *testing.T) {
	ports, err := Ports(5)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if reserve(p) {
			t.Fatalf("port %d reserved twice", p)
		}
	}
}
