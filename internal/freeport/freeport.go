// Package freeport hands out loopback ports for servers that tests start on
// fixed addresses: controller voters must know each other's addresses before
// any of them listens, and a restarted node must come back on its old address.
//
// Asking the kernel for port 0 and closing the listener is not enough: that
// port comes from the ephemeral range, which the kernel also hands to outgoing
// connections, so a busy test run can take it before the server binds it
// ("address already in use"). The ports given here lie below the ephemeral
// range, where only a listener that names its port can take them. Test binaries of
// several packages run at once, each handing out ports, so a port is also
// reserved for the life of the process that handed it out (reserve): another
// process never hands out the same one, even between the probe and the bind.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// lowest is the first port handed out; the range ends below the ephemeral one.
const lowest = 10000

// Ports returns n distinct ports below the kernel's ephemeral port range, each
// free right now on every one of hosts (127.0.0.1 when none is given; a host
// may repeat).
func Ports(n int, hosts ...string) ([]int, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	hosts = slices.Compact(slices.Sorted(slices.Values(hosts)))
	highest := ephemeralStart() - 1
	var probes []net.Listener
	defer func() {
		for _, ln := range probes {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 1000 {
			return nil, fmt.Errorf("freeport: no free port on %v in %d-%d", hosts, lowest, highest)
		}
		port := lowest + rand.IntN(highest-lowest+1)
		held, free := listenAll(hosts, port)
		probes = append(probes, held...)
		if free && reserve(port) {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// listenAll listens on port on every host; it reports whether all succeeded and
// returns the listeners it opened, for the caller to close.
func listenAll(hosts []string, port int) ([]net.Listener, bool) {
	var held []net.Listener
	for _, host := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return held, false
		}
		held = append(held, ln)
	}
	return held, true
}

// Addr returns "127.0.0.1:port" for a port that is free now.
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// ephemeralStart reads the first port of the kernel's ephemeral range, or
// assumes Linux's default when it cannot.
func ephemeralStart() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return linuxDefault
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start <= lowest+100 {
		return linuxDefault
	}
	return start
}
