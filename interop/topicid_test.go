package interop

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/interop/kafkatools"
)

// TestKafkaToolsTopicIDVersions: Kafka 4.4's console producer and a KIP-848
// console consumer use the topic-id versions against Strata, Produce v13,
// OffsetCommit v10 and OffsetFetch v10 (the newest both sides support, as
// against Kafka 4.4), and work: the records come back and the group's offsets
// are committed. Strata advertises a recording proxy, so every request of the
// tools goes through it and its version is counted off the wire.
func TestKafkaToolsTopicIDVersions(t *testing.T) {
	kafkatools.Require(t)
	proxy := newVersionProxy(t)
	tgt := startStrataWith(t, nil, "--advertised-kafka-addr", proxy.addr)
	proxy.forwardTo(tgt.bootstrap)
	createTopics(t, tgt.bootstrap, 2, "ids")
	bs := []string{"--bootstrap-server", proxy.addr}

	kafkatools.MustRunInput(t, "k1:v1\nk2:v2\nk1:v3\n", "kafka-console-producer", append(bs, "--topic", "ids",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)
	// A KIP-848 consumer (group.protocol=consumer): Kafka 4.4's classic
	// consumer and admin client name topics in OffsetCommit and OffsetFetch
	// (v9 at most), as they do against Kafka.
	out := kafkatools.MustRun(t, "kafka-console-consumer", append(bs, "--topic", "ids", "--from-beginning", "--max-messages", "3",
		"--group", "ids-group", "--consumer-property", "group.protocol=consumer",
		"--formatter-property", "print.key=true", "--timeout-ms", "60000")...)
	for _, kv := range []string{"k1\tv1", "k2\tv2", "k1\tv3"} {
		expectContains(t, out, kv)
	}
	for _, want := range []struct {
		key     int16
		name    string
		version int16
	}{{0, "Produce", 13}, {8, "OffsetCommit", 10}, {9, "OffsetFetch", 10}} {
		got := proxy.versions(want.key)
		if len(got) != 1 || got[want.version] == 0 {
			t.Errorf("%s versions sent (version: requests) %v; Kafka 4.4's tools use v%d only", want.name, got, want.version)
		}
	}
	// The committed offsets, read back by name (kafka-consumer-groups):
	// the 3 records over the topic's 2 partitions.
	out = kafkatools.MustRun(t, "kafka-consumer-groups", append(bs, "--describe", "--group", "ids-group")...)
	rows := regexp.MustCompile(`(?m)^ids-group\s+ids\s+\d+\s+(\d+)\s+(\d+)\s+0\b`).FindAllStringSubmatch(out, -1)
	committed := 0
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		committed += n
	}
	if len(rows) != 2 || committed != 3 {
		t.Errorf("committed offsets %v, want 2 partitions without lag holding 3 records:\n%s", rows, out)
	}
	// Kafka's transactional copier (a read-process-write loop, a classic
	// consumer): TxnOffsetCommit v6 commits its group's offsets in each
	// transaction.
	proxy.reset()
	createTopics(t, tgt.bootstrap, 1, "ids-in", "ids-out")
	kafkatools.MustRunInput(t, "a\nb\nc\n", "kafka-console-producer", append(bs, "--topic", "ids-in")...)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatools.DefaultTimeout)
	defer cancel()
	copier := exec.CommandContext(ctx, "java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", filepath.Join(kafkatools.JarsDir(), "*"),
		"org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", proxy.addr, "--input-topic", "ids-in",
		"--input-partition", "0", "--output-topic", "ids-out", "--consumer-group", "ids-copier", "--transactional-id", "ids-tx",
		"--transaction-size", "1", "--max-messages", "3", "--use-group-metadata")
	if out, err := copier.CombinedOutput(); err != nil {
		t.Fatalf("TransactionalMessageCopier: %v\n%s", err, out)
	}
	out = kafkatools.MustRun(t, "kafka-console-consumer", append(bs, "--topic", "ids-out", "--from-beginning", "--max-messages", "3",
		"--isolation-level", "read_committed", "--timeout-ms", "60000")...)
	for _, v := range []string{"a", "b", "c"} {
		expectContains(t, out, v)
	}
	if got := proxy.versions(28); len(got) != 1 || got[6] == 0 {
		t.Errorf("TxnOffsetCommit versions sent (version: requests) %v; Kafka 4.4's producer uses v6 only", got)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, "ids-copier")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup("ids-in", 0); !ok || o.At != 3 {
		t.Errorf("the copier's committed offset: %+v, want 3", o)
	}
}

// versionProxy forwards Kafka connections to a broker and counts the requests
// by API key and version, read off each request frame's header.
type versionProxy struct {
	addr     string
	upstream chan string // the broker's address, once known
	mu       sync.Mutex
	seen     map[int16]map[int16]int
}

func newVersionProxy(t *testing.T) *versionProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &versionProxy{addr: ln.Addr().String(), upstream: make(chan string, 1), seen: map[int16]map[int16]int{}}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		var upstream string
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if upstream == "" {
				upstream = <-p.upstream
			}
			conns.Add(1)
			go func() { defer conns.Done(); p.serve(c, upstream) }()
		}
	}()
	return p
}

// forwardTo sets the broker the proxy forwards to; connections accepted before
// wait for it.
func (p *versionProxy) forwardTo(addr string) { p.upstream <- addr }

func (p *versionProxy) serve(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	go func() { io.Copy(c, u); c.Close() }()
	var hdr [8]byte // size, key, version
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		size := int64(binary.BigEndian.Uint32(hdr[:4]))
		key, version := int16(binary.BigEndian.Uint16(hdr[4:6])), int16(binary.BigEndian.Uint16(hdr[6:8]))
		p.mu.Lock()
		if p.seen[key] == nil {
			p.seen[key] = map[int16]int{}
		}
		p.seen[key][version]++
		p.mu.Unlock()
		if _, err := u.Write(hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(u, c, size-4); err != nil {
			return
		}
	}
}

// reset forgets the requests counted so far.
func (p *versionProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = map[int16]map[int16]int{}
}

// versions returns how many requests of key went through, by version.
func (p *versionProxy) versions(key int16) map[int16]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int16]int{}
	for v, n := range p.seen[key] {
		out[v] = n
	}
	return out
}
