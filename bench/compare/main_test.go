package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/bench"
)

// TestParseBrokerCodecs: -broker-codecs takes topic compression.type values,
// each once.
func TestParseBrokerCodecs(t *testing.T) {
	if got, err := parseBrokerCodecs(""); err != nil || got != nil {
		t.Fatalf(`"": %v, %v`, got, err)
	}
	if got, err := parseBrokerCodecs("zstd, lz4,uncompressed"); err != nil || !slices.Equal(got, []string{"zstd", "lz4", "uncompressed"}) {
		t.Fatalf("zstd, lz4,uncompressed: %v, %v", got, err)
	}
	for _, bad := range []string{"zstd,zstd", "none", "zstd,", "ZSTD"} {
		if got, err := parseBrokerCodecs(bad); err == nil {
			t.Errorf("%q: accepted as %v", bad, got)
		}
	}
}

// TestBrokerCodecRows: each -broker-codecs value adds one produce row whose
// producer sends uncompressed 1 KiB records, acks=all, to a topic created with
// that compression.type; no other row sets a topic config. The compressed
// rows carry the -codec-payload and say so in their names.
func TestBrokerCodecRows(t *testing.T) {
	for _, tc := range []struct {
		payload, size, wantPayload string
	}{
		{bench.PayloadText, "1 KiB text", bench.PayloadText},
		{bench.PayloadLetters, "1 KiB", ""},
	} {
		o := options{nodes: 1, brokerCodecs: []string{"zstd", "lz4"}, codecs: []string{"zstd"}, codecPayload: tc.payload, e2eRates: []int{1000}}
		want := map[string]string{"produce " + tc.size + ", acks=all, broker zstd": "zstd", "produce " + tc.size + ", acks=all, broker lz4": "lz4"}
		compressed := map[string]bool{"produce " + tc.size + " zstd, acks=all": true, "consume " + tc.size + " zstd": true}
		slugs := map[string]bool{}
		for _, wl := range workloads(o) {
			if slugs[wl.slug] {
				t.Errorf("%s: slug %q twice", wl.name, wl.slug)
			}
			slugs[wl.slug] = true
			c := workloadConfig(o, wl, 1, []string{"127.0.0.1:1"})
			codec, ok := want[wl.name]
			wantPayload := ""
			if ok || compressed[wl.name] {
				wantPayload = tc.wantPayload
			}
			if c.Payload != wantPayload {
				t.Errorf("%s: payload %q, want %q", wl.name, c.Payload, wantPayload)
			}
			delete(compressed, wl.name)
			if !ok {
				if c.TopicConfigs != nil {
					t.Errorf("%s: topic configs %v", wl.name, c.TopicConfigs)
				}
				continue
			}
			delete(want, wl.name)
			if wl.mode != "produce" || c.Compression != "none" || c.Acks != bench.AcksAll || c.RecordSize != 1024 ||
				c.Producers != 1 || c.Partitions != 1 || len(c.TopicConfigs) != 1 || c.TopicConfigs["compression.type"] != codec {
				t.Errorf("%s: mode %s, producer codec %s, acks %s, %d B, %d producers on %d partitions, topic configs %v",
					wl.name, wl.mode, c.Compression, c.Acks, c.RecordSize, c.Producers, c.Partitions, c.TopicConfigs)
			}
		}
		if len(want) != 0 || len(compressed) != 0 {
			t.Fatalf("payload %s: rows missing: %v %v", tc.payload, want, compressed)
		}
		o.only = regexp.MustCompile("broker zstd")
		var names []string
		for _, wl := range workloads(o) {
			names = append(names, wl.name)
		}
		if strings.Join(names, "|") != "produce "+tc.size+", acks=all, broker zstd" {
			t.Fatalf("-only 'broker zstd': %q", names)
		}
	}
}
