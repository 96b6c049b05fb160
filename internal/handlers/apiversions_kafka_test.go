package handlers

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka44Differences are the keys whose ApiVersions range differs from Kafka
// 4.4.0's (testdata/kafka-4.4-apiversions.txt), each with its reason.
var kafka44Differences = map[int16]string{
	// Deliberate: Strata always serves client telemetry (KIP-714); Kafka lists
	// these keys only when a client telemetry reporter is configured, which
	// the captured node had not.
	71: "GetTelemetrySubscriptions listed",
	72: "PushTelemetry listed",
}

// TestVersionsAsKafka44: the Kafka listener's ApiVersions v4 answer lists
// every key at the range a Kafka 4.4.0 node lists it at, but for
// kafka44Differences (which must still differ, so the list stays honest).
func TestVersionsAsKafka44(t *testing.T) {
	want := readKafkaRanges(t, "testdata/kafka-4.4-apiversions.txt")
	got := map[int16][2]int16{}
	for _, k := range askApiVersions(t).ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key := range kmsg.MaxKey + 1 {
		key := int16(key)
		w, inKafka := want[key]
		g, inStrata := got[key]
		same := inKafka == inStrata && w == g
		reason, listed := kafka44Differences[key]
		switch {
		case !same && !listed:
			t.Errorf("%s (%d): Strata lists %s, Kafka 4.4 %s", kmsg.NameForKey(key), key, rangeText(g, inStrata), rangeText(w, inKafka))
		case same && listed:
			t.Errorf("%s (%d) is listed as a difference (%s) but matches Kafka 4.4 (%s)", kmsg.NameForKey(key), key, reason, rangeText(g, inStrata))
		}
	}
}

// TestLowVersionsAsKafka44: the lowest listed versions are answered or
// refused as Kafka 4.4 does: Produce is listed from v0, yet a v0-v2 request
// closes the connection unanswered; JoinGroup v0 and v1 are answered.
func TestLowVersionsAsKafka44(t *testing.T) {
	base := newErrorsHandlers(t)
	h := New(base.cfg, base.cluster, base.replicas, joinAnswering{}, nil, base.log)
	produce := func(v int16) kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = 1, 1000
		return req
	}
	join := func(v int16) kmsg.Request {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(v)
		req.Group, req.ProtocolType, req.SessionTimeoutMillis = "g", "consumer", 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
		return req
	}
	tests := []struct {
		name     string
		req      kmsg.Request
		answered bool
	}{
		{"Produce v0", produce(0), false},
		{"Produce v1", produce(1), false},
		{"Produce v2", produce(2), false},
		{"Produce v3", produce(3), true},
		{"JoinGroup v0", join(0), true},
		{"JoinGroup v1", join(1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := serveConn(t, h)
			sendRequest(t, nc, tt.req, 5)
			corr, err := readCorrelation(bufio.NewReader(nc))
			if answered := err == nil && corr == 5; answered != tt.answered {
				t.Errorf("answered %t (err %v), want %t", answered, err, tt.answered)
			}
		})
	}
}

// joinAnswering is a coordinator that answers every JoinGroup NOT_COORDINATOR.
type joinAnswering struct{ Groups }

func (joinAnswering) JoinGroup(_ context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = kerr.NotCoordinator.Code
	return resp
}

// askApiVersions asks a Kafka listener serving Versions for ApiVersions v4.
func askApiVersions(t *testing.T) *kmsg.ApiVersionsResponse {
	t.Helper()
	nc := serveConn(t, newErrorsHandlers(t))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1"
	sendRequest(t, nc, req, 1)
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(4)
	if err := resp.ReadFrom(frame[4:]); err != nil { // after the correlation id
		t.Fatal(err)
	}
	return resp
}

// readKafkaRanges reads "key min max" lines ('#' starts a comment).
func readKafkaRanges(t *testing.T, path string) map[int16][2]int16 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[int16][2]int16{}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		var key, lo, hi int16
		if _, err := fmt.Sscan(line, &key, &lo, &hi); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		ranges[key] = [2]int16{lo, hi}
	}
	return ranges
}

func rangeText(r [2]int16, listed bool) string {
	if !listed {
		return "nothing"
	}
	return fmt.Sprintf("v%d-v%d", r[0], r[1])
}
