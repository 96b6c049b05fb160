package server

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestConnectionTimeoutsReachTheKafkaListener: --connections-max-idle closes an
// idle Kafka connection, and --request-body-timeout one whose request body
// stalls, each with the other turned off (0).
func TestConnectionTimeoutsReachTheKafkaListener(t *testing.T) {
	apiVersions := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff} // ApiVersions v0
	tests := []struct {
		name       string
		idle, body time.Duration
		send       []byte
		answered   bool
	}{
		{name: "idle", idle: 300 * time.Millisecond, send: apiVersions, answered: true},
		{name: "stalled body", body: 300 * time.Millisecond, send: []byte{0, 0, 1, 0}}, // a 256-byte frame's size alone
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := nodeConfig(t.TempDir())
			cfg.ConnectionsMaxIdle, cfg.RequestBodyTimeout = tt.idle, tt.body
			n := startNode(t, cfg)
			nc, err := net.Dial("tcp", n.KafkaAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if tt.answered {
				var size [4]byte
				if _, err := io.ReadFull(nc, size[:]); err != nil {
					t.Fatalf("not answered: %v", err)
				}
			}
			if _, err := io.Copy(io.Discard, nc); err != nil {
				t.Fatalf("connection not closed by the broker: %v", err)
			}
		})
	}
}
