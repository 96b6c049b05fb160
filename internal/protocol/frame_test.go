package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testVersions is the registry most tests serve.
var testVersions = []VersionRange{
	{Key: 0, Min: 0, Max: kmsg.NewPtrProduceRequest().MaxVersion(), RefuseBelow: 3}, // as Kafka 4.4
	{Key: 1, Min: 4, Max: kmsg.NewPtrFetchRequest().MaxVersion()},
	{Key: 3, Min: 0, Max: kmsg.NewPtrMetadataRequest().MaxVersion()},
	{Key: 7, Min: 0, Max: 3}, // ControlledShutdown: v0 has no client id in its header
}

func mustRegistry(tb testing.TB) *registry {
	tb.Helper()
	g, err := newRegistry(testVersions)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// frameOf encodes req as a full request frame (size prefix included).
func frameOf(req kmsg.Request, version int16, corr int32, clientID *string) []byte {
	req.SetVersion(version)
	f := kmsg.RequestFormatter{}
	if clientID != nil {
		f = *kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	}
	return f.AppendRequest(nil, req, corr)
}

// rawFrame builds a frame from a header and body by hand.
func rawFrame(key, version int16, corr int32, rest ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = kbin.AppendInt16(b, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	for _, r := range rest {
		b = append(b, r...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 3*eagerFrameBytes+5) // exercises the growing buffer
	sized := func(size int32, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
	}
	tests := []struct {
		name    string
		in      []byte
		max     int32
		want    []byte
		wantErr error
	}{
		{"small", sized(3, []byte("abc")), 100, []byte("abc"), nil},
		{"exactly max", sized(4, []byte("abcd")), 4, []byte("abcd"), nil},
		{"larger than eager allocation", sized(int32(len(big)), big), 1 << 30, big, nil},
		{"clean EOF", nil, 100, nil, io.EOF},
		{"partial size", []byte{0, 0}, 100, nil, ErrTruncatedFrame},
		{"zero size", sized(0, nil), 100, nil, ErrFrameSize},
		{"negative size", sized(-1, nil), 100, nil, ErrFrameSize},
		{"min int32 size", sized(-1<<31, nil), 100, nil, ErrFrameSize},
		{"above max", sized(101, nil), 100, nil, ErrFrameTooLarge},
		{"truncated body", sized(10, []byte("abc")), 100, nil, ErrTruncatedFrame},
		{"truncated large body", sized(int32(len(big)), big[:eagerFrameBytes+1]), 1 << 30, nil, ErrTruncatedFrame},
	}
	for _, tt := range tests {
		// A connection reads through a bufio.Reader, which the size prefix is
		// read from in place; a plain io.Reader goes through io.ReadFull.
		for _, buffered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/buffered=%t", tt.name, buffered), func(t *testing.T) {
				var r io.Reader = bytes.NewReader(tt.in)
				if buffered {
					r = bufio.NewReader(r)
				}
				got, err := readFrame(r, tt.max)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if !bytes.Equal(got, tt.want) {
					t.Fatalf("got %d bytes, want %d", len(got), len(tt.want))
				}
			})
		}
	}
}

func TestDecodeRequest(t *testing.T) {
	g := mustRegistry(t)
	metaMax := kmsg.NewPtrMetadataRequest().MaxVersion()
	full := frameOf(metadataRequest("a", "b"), 12, 9, kmsg.StringPtr("cid"))
	// A flexible header carrying one tag (key 5, two bytes) before the body.
	taggedBody := metadataRequest("t")
	taggedBody.SetVersion(12)
	tagged := rawFrame(3, 12, 11, kbin.AppendNullableString(nil, kmsg.StringPtr("x")),
		[]byte{1, 5, 2, 0xAA, 0xBB}, taggedBody.AppendTo(nil))
	// kmsg's RequestFormatter drops the body of ControlledShutdown v0: build it here.
	shutdownV0 := rawFrame(7, 0, 2, (&kmsg.ControlledShutdownRequest{BrokerID: 3}).AppendTo(nil))
	tests := []struct {
		name     string
		frame    []byte // with size prefix
		wantErr  error
		check    func(t *testing.T, r *Request)
		wantKey  int16
		wantVer  int16
		wantCorr int32
	}{
		{name: "metadata v12 flexible", frame: full, wantKey: 3, wantVer: 12, wantCorr: 9, check: func(t *testing.T, r *Request) {
			m := r.Msg.(*kmsg.MetadataRequest)
			if len(m.Topics) != 2 || *m.Topics[1].Topic != "b" || r.ClientID == nil || *r.ClientID != "cid" || r.Size != len(full) {
				t.Fatalf("decoded %+v (client id %v, size %d)", m.Topics, r.ClientID, r.Size)
			}
		}},
		{name: "metadata v1 null client id", frame: frameOf(metadataRequest("a"), 1, -5, nil), wantKey: 3, wantVer: 1, wantCorr: -5, check: func(t *testing.T, r *Request) {
			if r.ClientID != nil {
				t.Fatalf("client id %q, want nil", *r.ClientID)
			}
		}},
		{name: "header tags skipped", frame: tagged, wantKey: 3, wantVer: 12, wantCorr: 11, check: func(t *testing.T, r *Request) {
			if m := r.Msg.(*kmsg.MetadataRequest); len(m.Topics) != 1 || *m.Topics[0].Topic != "t" {
				t.Fatalf("decoded %+v", m.Topics)
			}
		}},
		{name: "controlled shutdown v0 has no client id", frame: shutdownV0, wantKey: 7, wantCorr: 2, check: func(t *testing.T, r *Request) {
			if r.ClientID != nil || r.Msg.(*kmsg.ControlledShutdownRequest).BrokerID != 3 {
				t.Fatalf("client id %v, broker %d", r.ClientID, r.Msg.(*kmsg.ControlledShutdownRequest).BrokerID)
			}
		}},
		{name: "api versions v3", frame: frameOf(&kmsg.ApiVersionsRequest{ClientSoftwareName: "n", ClientSoftwareVersion: "1"}, 3, 1, nil), wantKey: 18, wantVer: 3, wantCorr: 1},
		{name: "api versions too new is not parsed", frame: rawFrame(18, 9, 4, []byte{0xFF, 0xFF, 0xFF}), wantKey: 18, wantVer: 9, wantCorr: 4, check: func(t *testing.T, r *Request) {
			if r.Msg.GetVersion() != 0 {
				t.Fatalf("stub version %d, want 0", r.Msg.GetVersion())
			}
		}},
		{name: "header too short", frame: rawFrame(3, 1, 1)[:9], wantErr: ErrTruncatedHeader},
		{name: "client id longer than frame", frame: rawFrame(3, 1, 1, []byte{0, 50, 'a'}), wantErr: ErrTruncatedHeader},
		{name: "header tags truncated", frame: rawFrame(3, 12, 1, []byte{0xFF, 0xFF}, []byte{3, 1}), wantErr: ErrTruncatedHeader},
		{name: "unknown to kmsg", frame: rawFrame(1000, 0, 1, []byte{0xFF, 0xFF}), wantErr: ErrUnknownAPIKey},
		{name: "negative key", frame: rawFrame(-3, 0, 1, []byte{0xFF, 0xFF}), wantErr: ErrUnknownAPIKey},
		{name: "known to kmsg but not registered", frame: frameOf(kmsg.NewPtrListGroupsRequest(), 1, 1, nil), wantErr: ErrUnknownAPIKey},
		{name: "version above range", frame: rawFrame(3, metaMax+1, 1, []byte{0xFF, 0xFF}), wantErr: ErrUnsupportedVersion},
		{name: "version below range", frame: frameOf(kmsg.NewPtrProduceRequest(), 2, 1, nil), wantErr: ErrUnsupportedVersion},
		{name: "negative version", frame: rawFrame(3, -1, 1, []byte{0xFF, 0xFF}), wantErr: ErrUnsupportedVersion},
		// Below the range as above it: answered at v0 (TestApiVersionsNegativeVersion).
		{name: "api versions negative version is not parsed", frame: rawFrame(18, -1, 1, []byte{0xFF, 0xFF}), wantKey: 18, wantVer: -1, wantCorr: 1, check: func(t *testing.T, r *Request) {
			if r.Msg.GetVersion() != 0 {
				t.Fatalf("stub version %d, want 0", r.Msg.GetVersion())
			}
		}},
		{name: "truncated body", frame: full[:len(full)-3], wantErr: ErrMalformedRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := g.decodeRequest(tt.frame[4:])
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if r.Key != tt.wantKey || r.Version != tt.wantVer || r.CorrelationID != tt.wantCorr || r.Msg.Key() != tt.wantKey {
				t.Fatalf("got key %d version %d corr %d msg key %d", r.Key, r.Version, r.CorrelationID, r.Msg.Key())
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestNewRegistry(t *testing.T) {
	tests := []struct {
		name   string
		ranges []VersionRange
		ok     bool
	}{
		{"empty: only ApiVersions and the SASL keys", nil, true},
		{"test versions", testVersions, true},
		{"ApiVersions listed", []VersionRange{{Key: 18, Min: 0, Max: 4}}, false},
		{"SaslHandshake listed", []VersionRange{{Key: 17, Min: 1, Max: 1}}, false},
		{"duplicate key", []VersionRange{{Key: 3, Min: 0, Max: 1}, {Key: 3, Min: 2, Max: 3}}, false},
		{"unknown key", []VersionRange{{Key: 999, Min: 0, Max: 0}}, false},
		{"negative key", []VersionRange{{Key: -1, Min: 0, Max: 0}}, false},
		{"min above max", []VersionRange{{Key: 3, Min: 5, Max: 4}}, false},
		{"negative min", []VersionRange{{Key: 3, Min: -1, Max: 4}}, false},
		{"max above kmsg", []VersionRange{{Key: 3, Min: 0, Max: 99}}, false},
		{"refuse below min", []VersionRange{{Key: 3, Min: 2, Max: 4, RefuseBelow: 2}}, false},
		{"refuse above max", []VersionRange{{Key: 3, Min: 0, Max: 4, RefuseBelow: 5}}, false},
		{"refuse up to max", []VersionRange{{Key: 3, Min: 0, Max: 4, RefuseBelow: 4}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := newRegistry(tt.ranges)
			if tt.ok != (err == nil) {
				t.Fatalf("err = %v, want ok %t", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidVersions) {
					t.Fatalf("err = %v, want ErrInvalidVersions", err)
				}
				return
			}
			if !slices.IsSortedFunc(g.apiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) }) ||
				len(g.apiKeys) != len(tt.ranges)+1+len(saslVersions) {
				t.Fatalf("apiKeys %+v", g.apiKeys)
			}
		})
	}
}

func TestFlexibleResponseHeader(t *testing.T) {
	g := mustRegistry(t)
	tests := []struct {
		key, version int16
		want         bool
	}{
		{3, 8, false}, {3, 9, true}, {3, 12, true}, // Metadata is flexible from v9
		{1, 11, false}, {1, 12, true}, // Fetch from v12
		{18, 3, false}, {18, 4, false}, {18, 5, false}, // ApiVersions: always response header v0
		{7, 0, false}, {7, 3, true},
		{42, 5, false}, // not registered
	}
	for _, tt := range tests {
		if got := g.flexibleResponseHeader(tt.key, tt.version); got != tt.want {
			t.Errorf("key %d v%d: got %t, want %t", tt.key, tt.version, got, tt.want)
		}
	}
}

func TestValidSoftwareField(t *testing.T) {
	for s, want := range map[string]bool{
		"kgo": true, "v1.22.3": true, "librdkafka": true, "apache-kafka-java": true, "a": true, "3.7.0-SNAPSHOT": true,
		"": false, "-a": false, "a-": false, ".a": false, "a b": false, "a_b": false, "a+dirty": false, "ü": false,
	} {
		if got := validSoftwareField(s); got != want {
			t.Errorf("%q: got %t, want %t", s, got, want)
		}
	}
}

// FuzzReadRequest feeds arbitrary bytes through frame reading and request
// decoding, as the reader goroutine does, and encodes a response to whatever
// decodes. Nothing may panic, errors must be this package's, and a decoded
// request must be consistent with the registry.
func FuzzReadRequest(f *testing.F) {
	f.Add(frameOf(metadataRequest("a"), 12, 1, kmsg.StringPtr("c")))
	g := mustRegistry(f)
	known := []error{io.EOF, ErrFrameSize, ErrFrameTooLarge, ErrTruncatedFrame, ErrTruncatedHeader,
		ErrUnknownAPIKey, ErrUnsupportedVersion, ErrMalformedRequest}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := bytes.NewReader(data)
		for range 8 {
			frame, err := readFrame(rd, 1<<16)
			if err == nil {
				var r *Request
				r, err = g.decodeRequest(frame)
				if err == nil {
					checkDecoded(t, g, r)
					continue
				}
			}
			if !slices.ContainsFunc(known, func(k error) bool { return errors.Is(err, k) }) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
	})
}

func checkDecoded(t *testing.T, g *registry, r *Request) {
	if r.Msg == nil || r.Msg.Key() != r.Key {
		t.Fatalf("request key %d with msg %T", r.Key, r.Msg)
	}
	if r.Key == apiVersionsKey && r.Version > apiVersionsMax {
		return
	}
	e, ok := g.lookup(r.Key)
	if !ok || r.Version < e.min || r.Version > e.max || r.Msg.GetVersion() != r.Version {
		t.Fatalf("decoded %s v%d outside the registry", kmsg.NameForKey(r.Key), r.Version)
	}
	resp := r.Msg.ResponseKind()
	buf := appendResponseHeader(nil, r.CorrelationID, g.flexibleResponseHeader(r.Key, r.Version))
	buf = resp.AppendTo(buf)
	putFrameSize(buf, len(buf)-4)
}

// BenchmarkDecodeEncode measures one request's trip through the codec: frame
// read, header and body decode, response encode into a reused buffer.
func BenchmarkDecodeEncode(b *testing.B) {
	g := mustRegistry(b)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "events"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{1}, 1024)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	benchmarks := []struct {
		name    string
		req     kmsg.Request
		version int16
	}{
		{"metadata-v12-3-topics", metadataRequest("a", "bb", "ccc"), 12},
		{"produce-v9-1KiB", produce, 9},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			frame := frameOf(bm.req, bm.version, 1, kmsg.StringPtr("bench"))
			resp := bm.req.ResponseKind()
			var out []byte
			rd := bytes.NewReader(frame)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(frame)
				body, err := readFrame(rd, DefaultMaxRequestBytes)
				if err != nil {
					b.Fatal(err)
				}
				r, err := g.decodeRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				resp.SetVersion(r.Version)
				out = appendResponseHeader(out[:0], r.CorrelationID, g.flexibleResponseHeader(r.Key, r.Version))
				out = resp.AppendTo(out)
				putFrameSize(out, len(out)-4)
			}
		})
	}
}
