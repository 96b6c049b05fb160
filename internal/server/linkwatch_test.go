package server

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/protocol"
)

// TestBrokerLinksReportsTheLatestConnection: only the close of the connection
// that carried a broker's latest heartbeat or registration is reported, with
// the epoch it heartbeated with (-1 after a registration).
func TestBrokerLinksReportsTheLatestConnection(t *testing.T) {
	type closed struct {
		id    int32
		epoch int64
	}
	var got []closed
	l := newBrokerLinks(func(id int32, epoch int64) { got = append(got, closed{id, epoch}) })
	conn := func(id uint64) *protocol.ConnInfo { return &protocol.ConnInfo{ID: id} }
	heartbeat := func(c uint64, broker int32, epoch int64) {
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.BrokerID, req.BrokerEpoch = broker, epoch
		l.OnRequest(conn(c), &protocol.Request{Key: req.Key(), Msg: req})
	}
	register := func(c uint64, broker int32) {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID = broker
		l.OnRequest(conn(c), &protocol.Request{Key: req.Key(), Msg: req})
	}
	other := func(c uint64) {
		req := kmsg.NewPtrCreateTopicsRequest()
		l.OnRequest(conn(c), &protocol.Request{Key: req.Key(), Msg: req})
	}

	register(1, 7)
	heartbeat(2, 8, 3)
	other(3)
	heartbeat(4, 9, 1)
	heartbeat(5, 9, 1) // broker 9 moved to connection 5
	steps := []struct {
		close uint64
		want  []closed
	}{
		{3, nil},               // an admin connection
		{4, nil},               // broker 9's old connection
		{1, []closed{{7, -1}}}, // broker 7 only registered
		{2, []closed{{8, 3}}},  // broker 8's heartbeats
		{2, nil},               // reported once
		{5, []closed{{9, 1}}},  // broker 9's latest
		{6, nil},               // unknown
	}
	for _, s := range steps {
		got = nil
		l.OnConnClose(conn(s.close), nil)
		if !slices.Equal(got, s.want) {
			t.Errorf("closing connection %d reported %v, want %v", s.close, got, s.want)
		}
	}
}
