package controllerlink

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMuxRoutesKafkaClients: a Kafka request reaches the client listener and
// every Raft RPC, encoded as hashicorp/raft's transport sends it (its type
// byte, then msgpack), reaches the Raft stream layer, each with its bytes
// intact.
func TestMuxRoutesKafkaClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, VoterKey{NodeID: 1}, nil)
	defer m.Close()
	type accepted struct {
		listener string
		c        net.Conn
	}
	routed := make(chan accepted, 8)
	for name, l := range map[string]net.Listener{"raft": m.Raft(ln.Addr(), nil, nil), "clients": m.Clients()} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				routed <- accepted{name, c}
			}
		}()
	}

	kafka := kmsg.NewRequestFormatter(kmsg.FormatterClientID("probe")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	cases := map[string][]byte{"kafka ApiVersions": kafka}
	for rpc, args := range map[string]any{
		"AppendEntries":   &raft.AppendEntriesRequest{Term: 1},
		"RequestVote":     &raft.RequestVoteRequest{Term: 1},
		"InstallSnapshot": &raft.InstallSnapshotRequest{Term: 1},
		"TimeoutNow":      &raft.TimeoutNowRequest{},
		"RequestPreVote":  &raft.RequestPreVoteRequest{Term: 1},
	} {
		var b bytes.Buffer
		b.WriteByte(map[string]byte{"AppendEntries": 0, "RequestVote": 1, "InstallSnapshot": 2, "TimeoutNow": 3, "RequestPreVote": 4}[rpc])
		if err := codec.NewEncoder(&b, &codec.MsgpackHandle{}).Encode(args); err != nil {
			t.Fatal(err)
		}
		cases["raft "+rpc] = b.Bytes()
	}
	for name, sent := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(sent); err != nil {
				t.Fatal(err)
			}
			want := "raft"
			if name == "kafka ApiVersions" {
				want = "clients"
			}
			select {
			case got := <-routed:
				defer got.c.Close()
				read := make([]byte, len(sent))
				if _, err := io.ReadFull(got.c, read); err != nil || got.listener != want || !bytes.Equal(read, sent) {
					t.Fatalf("routed to %s with %x (%v), want %s with %x", got.listener, read, err, want, sent)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("never routed")
			}
		})
	}
}
