package controllerlink

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestNamedRaftConnections: the Raft stream layer takes a plain connection,
// and one named for this node's voter key, with the bytes after the name
// intact; one named for another directory or another node is closed before
// Raft sees it, and the refusal is reported with the key it named.
func TestNamedRaftConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := VoterKey{NodeID: 3, DirectoryID: [16]byte{0xa, 1}}
	refused := make(chan VoterKey, 4)
	m := NewMux(ln, self, func(want VoterKey, _ net.Addr) { refused <- want })
	defer m.Close()
	stream := m.Raft(ln.Addr(), nil, nil)
	accepted := make(chan string, 8)
	go func() {
		for {
			c, err := stream.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 2)
			if _, err := io.ReadFull(c, b); err == nil {
				accepted <- string(b)
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	for _, tc := range []struct {
		name    string
		address string
		refuse  bool
	}{
		{"plain", addr, false},
		{"this voter", VoterAddr(addr, self), false},
		{"another directory", VoterAddr(addr, VoterKey{NodeID: 3, DirectoryID: [16]byte{0xb}}), true},
		{"another node", VoterAddr(addr, VoterKey{NodeID: 4, DirectoryID: self.DirectoryID}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := stream.Dial(raft.ServerAddress(tc.address), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A byte Raft would read as an RPC type, then one more.
			if _, err := c.Write([]byte{0x01, 'x'}); err != nil {
				t.Fatal(err)
			}
			if !tc.refuse {
				select {
				case got := <-accepted:
					if got != "\x01x" {
						t.Fatalf("Raft read %q, want the bytes sent after the name", got)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Raft never accepted the connection")
				}
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			// EOF, or a reset when the bytes after the name were unread.
			var ne net.Error
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("read on a refused connection: %v, want it closed", err)
			}
			_, k, _, _ := splitVoterAddr(tc.address)
			select {
			case got := <-refused:
				if got != k {
					t.Fatalf("refusal reported for %v, want %v", got, k)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the refusal was not reported")
			}
			select {
			case got := <-accepted:
				t.Fatalf("Raft accepted a refused connection (read %q)", got)
			default:
			}
		})
	}
	if _, err := stream.Dial(raft.ServerAddress(addr+"#3/not-base64!"), time.Second); err == nil {
		t.Error("a malformed voter address was dialled")
	}
}
