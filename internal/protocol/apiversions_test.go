package protocol

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fullApiVersions is the body of the answer to an accepted ApiVersions request
// at version v from a server of testVersions.
func fullApiVersions(reg *registry, v int16) []byte {
	want := kmsg.NewPtrApiVersionsResponse()
	want.SetVersion(v)
	want.ApiKeys = reg.apiKeys
	if v >= 3 { // each feature supported and finalized at its one level
		for _, f := range []struct {
			name  string
			level int16
		}{{"group.version", 1}, {"kraft.version", 1}, {"share.version", 2}, {"streams.version", 1}, {"transaction.version", 2}} {
			want.SupportedFeatures = append(want.SupportedFeatures,
				kmsg.ApiVersionsResponseSupportedFeature{Name: f.name, MinVersion: f.level, MaxVersion: f.level})
			want.FinalizedFeatures = append(want.FinalizedFeatures,
				kmsg.ApiVersionsResponseFinalizedFeature{Name: f.name, MinVersionLevel: f.level, MaxVersionLevel: f.level})
		}
		want.FinalizedFeaturesEpoch = 1
	}
	return want.AppendTo(nil)
}

// The error answers of a Kafka 4.4.0 broker to ApiVersions v5, byte for byte
// after the correlation id: the error code, no keys, throttle 0, no tags.
var (
	kafkaRebootstrapRequired = []byte{0x00, 0x81, 0x01, 0, 0, 0, 0, 0x00}
	kafkaInvalidRequest      = []byte{0x00, 0x2a, 0x01, 0, 0, 0, 0, 0x00}
)

const testClusterID = "CjGnwYmoh8dG50rX7C0Ddw"

// apiVersionsV5 is an ApiVersions v5 request naming cluster (nil: none) and node.
func apiVersionsV5(cluster *string, node int32) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1"
	req.ClusterID, req.NodeID = cluster, node
	return req
}

// TestApiVersionsV5 checks KIP-1242's answers against a Kafka 4.4.0 broker's
// (node 1 of testClusterID, asked the same requests over a raw connection):
// the cluster and node named both or neither, REBOOTSTRAP_REQUIRED for another
// cluster or node, and the connection left open after either error.
func TestApiVersionsV5(t *testing.T) {
	checked := startServer(t, HandlerFunc(echoHandler), func(s *Server) { s.ClusterID, s.NodeID = testClusterID, 1 })
	unchecked := startServer(t, HandlerFunc(echoHandler)) // no ClusterID: Kafka's controller listener
	reg := mustRegistry(t)
	other := "AAAAAAAAAAAAAAAAAAAAAA"
	tests := []struct {
		name    string
		srv     *testServer
		cluster *string
		node    int32
		want    []byte // nil: the full answer
	}{
		{"neither named", checked, nil, -1, nil},
		{"this cluster and node", checked, kmsg.StringPtr(testClusterID), 1, nil},
		{"another cluster", checked, &other, 1, kafkaRebootstrapRequired},
		{"another node", checked, kmsg.StringPtr(testClusterID), 2, kafkaRebootstrapRequired},
		{"empty cluster id", checked, kmsg.StringPtr(""), 1, kafkaRebootstrapRequired},
		{"this cluster, node -2", checked, kmsg.StringPtr(testClusterID), -2, kafkaRebootstrapRequired},
		{"cluster without node", checked, kmsg.StringPtr(testClusterID), -1, kafkaInvalidRequest},
		{"node without cluster", checked, nil, 1, kafkaInvalidRequest},
		{"node -2 without cluster", checked, nil, -2, kafkaInvalidRequest},
		{"another cluster, unchecked listener", unchecked, &other, 1, nil},
		{"cluster without node, unchecked listener", unchecked, kmsg.StringPtr(testClusterID), -1, kafkaInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, tt.srv.addr)
			c.send(apiVersionsV5(tt.cluster, tt.node), 5, 1)
			_, body := c.readFrame()
			want := tt.want
			if want == nil {
				want = fullApiVersions(reg, 5)
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("body\n got % x\nwant % x", body, want)
			}
			// The connection stays open, as Kafka's does.
			if got := c.roundTrip(apiVersionsV5(nil, -1), 5, 2).(*kmsg.ApiVersionsResponse); got.ErrorCode != 0 || len(got.ApiKeys) == 0 {
				t.Fatalf("next ApiVersions on the connection: %+v", got)
			}
		})
	}
}

// TestApiVersionsV5WithSASL: as Kafka 4.4 (KIP-1242 is checked where its
// KafkaApis answers), a SASL connection's cluster and node are checked once it
// authenticated, not before; a request naming one of them alone is refused
// either way.
func TestApiVersionsV5WithSASL(t *testing.T) {
	ts, _ := startSASLServer(t, 0, func(s *Server) { s.ClusterID, s.NodeID = testClusterID, 1 })
	reg := mustRegistry(t)
	other := "AAAAAAAAAAAAAAAAAAAAAA"
	c := dial(t, ts.addr)
	expect := func(req *kmsg.ApiVersionsRequest, corr int32, want []byte) {
		t.Helper()
		c.send(req, 5, corr)
		if _, body := c.readFrame(); !bytes.Equal(body, want) {
			t.Fatalf("ApiVersions %d: body\n got % x\nwant % x", corr, body, want)
		}
	}
	expect(apiVersionsV5(kmsg.StringPtr(testClusterID), -1), 1, kafkaInvalidRequest)
	expect(apiVersionsV5(&other, 1), 2, fullApiVersions(reg, 5))

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if hr := c.roundTrip(hs, 1, 3).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		t.Fatalf("PLAIN handshake: %+v", hr)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	if ar := c.roundTrip(auth, 2, 4).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 {
		t.Fatalf("PLAIN authenticate: %+v", ar)
	}
	expect(apiVersionsV5(&other, 1), 5, kafkaRebootstrapRequired)
	expect(apiVersionsV5(kmsg.StringPtr(testClusterID), 1), 6, fullApiVersions(reg, 5))
}

// apiVersionsSeen records, per connection, the ApiVersions requests a server
// read, and counts every other request.
type apiVersionsSeen struct {
	mu     sync.Mutex
	byConn map[uint64][]string // "v5 cluster/node"
	others atomic.Int64
}

func (h *apiVersionsSeen) OnRequest(c *ConnInfo, r *Request) {
	if r.Key != apiVersionsKey {
		h.others.Add(1)
		return
	}
	var named string
	if req := r.Msg.(*kmsg.ApiVersionsRequest); r.Version >= 5 {
		cluster := "-"
		if req.ClusterID != nil {
			cluster = *req.ClusterID
		}
		named = fmt.Sprintf(" %s/%d", cluster, req.NodeID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byConn == nil {
		h.byConn = make(map[uint64][]string)
	}
	h.byConn[c.ID] = append(h.byConn[c.ID], fmt.Sprintf("v%d%s", r.Version, named))
}

func (h *apiVersionsSeen) conns() map[uint64][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[uint64][]string, len(h.byConn))
	for id, seen := range h.byConn {
		out[id] = append([]string(nil), seen...)
	}
	return out
}

// clusterHandler answers Metadata as node 1 of cluster, with node 1 at the
// address broker1 returns, and Produce as echoHandler.
func clusterHandler(cluster string, broker1 func(c *ConnInfo) string) HandlerFunc {
	return func(ctx context.Context, c *ConnInfo, r *Request) Response {
		m, ok := r.Msg.(*kmsg.MetadataRequest)
		if !ok {
			return echoHandler(ctx, c, r)
		}
		resp := m.ResponseKind().(*kmsg.MetadataResponse)
		resp.ClusterID = kmsg.StringPtr(cluster)
		host, port, _ := net.SplitHostPort(broker1(c))
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, host, int32(p)
		resp.Brokers = append(resp.Brokers, b)
		return Response{Msg: resp}
	}
}

// seededClient is a franz-go client of seed, closed at cleanup, and a context
// that ends after testTimeout.
func seededClient(t *testing.T, seed string) (*kgo.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return cl, ctx
}

// TestKgoOneApiVersionsRoundTrip: franz-go opens a connection with ApiVersions
// v5, which is answered at once (v4 at most made it ask twice, v5 then v4), and
// names the cluster and node once its metadata knows them.
func TestKgoOneApiVersionsRoundTrip(t *testing.T) {
	seen := &apiVersionsSeen{}
	ts := startServer(t, clusterHandler(testClusterID, func(c *ConnInfo) string { return c.LocalAddr.String() }),
		func(s *Server) {
			s.ClusterID, s.NodeID = testClusterID, 1
			s.Hooks = append(s.Hooks, seen)
		})
	cl, ctx := seededClient(t, ts.addr)
	// The first request goes to the seed; the second to broker 1, which the
	// seed's metadata named, over a connection of its own.
	if _, err := cl.Request(ctx, metadataRequest("t")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Broker(1).Request(ctx, produceRequest(1)); err != nil {
		t.Fatal(err)
	}
	conns := seen.conns()
	if len(conns) != 2 {
		t.Fatalf("ApiVersions on %d connections, want 2 (seed, broker 1): %v", len(conns), conns)
	}
	named := 0
	for id, got := range conns {
		switch {
		case len(got) != 1:
			t.Errorf("connection %d: ApiVersions %v, want one request", id, got)
		case got[0] == "v5 "+testClusterID+"/1":
			named++
		case got[0] != "v5 -/-1":
			t.Errorf("connection %d: ApiVersions %v, want v5 naming no broker (seed) or %s/1", id, got, testClusterID)
		}
	}
	if named != 1 {
		t.Errorf("%d connections named the cluster and node, want 1 (broker 1's): %v", named, conns)
	}
}

// TestKgoRebootstrapsWhenMisrouted: a franz-go client whose metadata (from
// cluster A) puts node 1 at an address where node 1 of cluster B listens is
// answered REBOOTSTRAP_REQUIRED there, forgets the brokers it discovered, asks
// its seed again and sends its request to A's node 1. B serves nothing but
// that one ApiVersions.
func TestKgoRebootstrapsWhenMisrouted(t *testing.T) {
	seenB := &apiVersionsSeen{}
	b := startServer(t, HandlerFunc(echoHandler), func(s *Server) {
		s.ClusterID, s.NodeID = "cluster-b", 1
		s.Hooks = append(s.Hooks, seenB)
	})
	// A's metadata names B's address for node 1 until B was reached.
	var producedOnA atomic.Int64
	metadataA := clusterHandler("cluster-a", func(c *ConnInfo) string {
		if len(seenB.conns()) == 0 {
			return b.addr
		}
		return c.LocalAddr.String()
	})
	a := startServer(t, HandlerFunc(func(ctx context.Context, c *ConnInfo, r *Request) Response {
		if _, ok := r.Msg.(*kmsg.ProduceRequest); ok {
			producedOnA.Add(1)
		}
		return metadataA(ctx, c, r)
	}), func(s *Server) { s.ClusterID, s.NodeID = "cluster-a", 1 })

	cl, ctx := seededClient(t, a.addr)
	if _, err := cl.Broker(1).RetriableRequest(ctx, produceRequest(1)); err != nil {
		t.Fatal(err)
	}
	if n := producedOnA.Load(); n != 1 {
		t.Errorf("A served %d Produce requests, want 1", n)
	}
	conns := seenB.conns()
	if len(conns) != 1 {
		t.Fatalf("B saw ApiVersions on %d connections, want 1: %v", len(conns), conns)
	}
	for _, got := range conns {
		if len(got) != 1 || got[0] != "v5 cluster-a/1" {
			t.Errorf("B saw ApiVersions %v, want one v5 naming cluster-a/1", got)
		}
	}
	if n := seenB.others.Load(); n != 0 {
		t.Errorf("B served %d requests besides ApiVersions, want 0", n)
	}
}
