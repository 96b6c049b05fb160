package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/httpapi"
	"github.com/strata-stream/strata/internal/metadata"
)

// fixedCluster is a metadata image built for a test: one topic led by broker 1.
type fixedCluster struct{ img *metadata.Image }

func (c fixedCluster) Image() *metadata.Image { return c.img }

func oneTopicImage(tb testing.TB, topic string, partitions int32) fixedCluster {
	tb.Helper()
	id := metadata.UUID{1, 2, 3}
	recs := []metadata.Record{&metadata.TopicRecord{Name: topic, ID: id}}
	for p := range partitions {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: p, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	}
	img, err := metadata.ApplyAll(metadata.NewImage(), recs)
	if err != nil {
		tb.Fatal(err)
	}
	return fixedCluster{img}
}

// BenchmarkProduce compares the two produce paths for a partition this node
// leads, each op one POST over loopback HTTP with acks=all:
//
//	path=local  the node's API: one batch built and appended directly
//	path=kafka  an API without the node's partitions: the embedded franz-go
//	            producer through the node's own Kafka listener
//
// records=1 is POST /produce of one small record; records=100 is one POST
// /topics/{topic}/records of 100; par runs the requests from GOMAXPROCS*4
// goroutines.
func BenchmarkProduce(b *testing.B) {
	n := sharedNode(b)
	n.createTopic("bench", 1)
	viaKafka, err := httpapi.New(httpapi.Config{KafkaAddr: n.KafkaAddr(), Cluster: oneTopicImage(b, "bench", 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer viaKafka.Close(context.Background())
	mux := http.NewServeMux()
	viaKafka.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	one := []byte(`{"topic":"bench","value":{"user":"u-1","event":"click","n":42}}`)
	var hundred strings.Builder
	hundred.WriteString(`{"records":[`)
	for i := range 100 {
		if i > 0 {
			hundred.WriteByte(',')
		}
		fmt.Fprintf(&hundred, `{"key":"k%d","value":{"user":"u-1","event":"click","n":%d}}`, i, i)
	}
	hundred.WriteString(`]}`)

	for _, path := range []struct{ name, base string }{{"local", n.base}, {"kafka", srv.URL}} {
		for _, size := range []struct {
			name string
			url  string
			body []byte
		}{{"1", "/produce", one}, {"100", "/topics/bench/records", []byte(hundred.String())}} {
			url := path.base + size.url
			b.Run(fmt.Sprintf("path=%s/records=%s", path.name, size.name), func(b *testing.B) {
				b.ReportAllocs() // client and node together: in-process
				b.SetBytes(int64(len(size.body)))
				for b.Loop() {
					post(b, url, size.body)
				}
			})
			b.Run(fmt.Sprintf("path=%s/records=%s/par", path.name, size.name), func(b *testing.B) {
				b.SetBytes(int64(len(size.body)))
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						post(b, url, size.body)
					}
				})
			})
		}
	}
}

func post(b *testing.B, url string, body []byte) {
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("status %d", resp.StatusCode)
	}
}
