package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// streamsClassPath is the word-count application interop/install.sh builds from
// interop/streams (Kafka Streams 4.4).
const streamsClassPath = "streams/target/classes:streams/target/dependency/*"

// TestKafkaStreams runs a Kafka Streams application (interop/streams: a word count
// with a repartition topic and a changelogged state store) against Strata, with
// lines produced before it starts and while it runs, and checks that the final
// count of every word on its output topic is exact and that Streams created its
// internal topics as it does on Kafka (the changelog compacted). It runs with
// at_least_once and with exactly_once_v2 (transactions: every input record's
// effect is committed once with the consumer's offsets).
func TestKafkaStreams(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		requireStreams(t, "java is not on PATH")
	}
	if _, err := os.Stat("streams/target/classes/io/strata/interop/streams/WordCount.class"); err != nil {
		requireStreams(t, "the Streams application is not built (streams/target)")
	}
	tgt := startTarget(t)
	for _, guarantee := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(guarantee, func(t *testing.T) { testWordCount(t, tgt.bootstrap, guarantee) })
	}
}

func requireStreams(t *testing.T, why string) {
	t.Helper()
	requireClient(t, client{name: "kafka-streams", missing: func() string { return why }})
}

func testWordCount(t *testing.T, bootstrap, guarantee string) {
	app := "wordcount-" + strings.ReplaceAll(guarantee, "_", "-")
	in, out := app+"-in", app+"-out"
	createTopics(t, bootstrap, 3, in, out)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	want := map[string]int64{}
	produceLines := func(from, to int) { produceWordLines(t, cl, in, want, from, to) }
	produceLines(0, 200)

	app1 := startWordCount(t, bootstrap, app, in, out, guarantee)
	counts := countsReader{cl: cl, got: map[string]int64{}}
	counts.await(t, "lines produced before the start", want, app1)
	produceLines(200, 260)
	counts.await(t, "lines produced while it runs", want, app1)

	// Streams made its internal topics as on Kafka: the changelog compacted.
	adm := kadm.NewClient(cl)
	changelog, repartition := app+"-counts-changelog", app+"-words-repartition"
	topics, err := adm.ListTopics(ctx, changelog, repartition)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{changelog, repartition} {
		if d, ok := topics[name]; !ok || d.Err != nil {
			t.Fatalf("internal topic %s: %+v", name, d)
		}
	}
	rc, err := adm.DescribeTopicConfigs(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On(changelog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cfg.Configs, func(c kadm.Config) bool {
		return c.Key == "cleanup.policy" && c.MaybeValue() == "compact"
	}) {
		t.Errorf("changelog %s is not compacted: %+v", changelog, cfg.Configs)
	}
	if err := app1.stop(); err != nil {
		t.Fatal(err)
	}
}

// countsReader follows a word count's output topic: got is the latest count of
// each word.
type countsReader struct {
	cl  *kgo.Client
	got map[string]int64
}

// await reads the output until the latest counts are want, failing the test after
// three minutes or when one of apps exits.
func (c *countsReader) await(t *testing.T, what string, want map[string]int64, apps ...*javaApp) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !mapsEqual(c.got, want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: final counts %v, want %v\nStreams output:\n%s", what, c.got, want, apps[0].output())
		}
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := c.cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != 8 {
				t.Fatalf("count of %q is %d bytes, want a long", r.Key, len(r.Value))
			}
			c.got[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		})
		for _, app := range apps {
			if app.exited() {
				t.Fatalf("%s: the Streams application exited early\n%s", what, app.output())
			}
		}
	}
}

// produceWordLines writes input lines from to to (see lineWords) to topic and
// counts their words into want.
func produceWordLines(t *testing.T, cl *kgo.Client, topic string, want map[string]int64, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		words := lineWords(i)
		for _, w := range words {
			want[w]++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(strings.Join(words, " "))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// lineWords are the words of input line i: w<k> appears in it when k divides i+1,
// so that the counts differ per word.
func lineWords(i int) []string {
	var words []string
	for k := 1; k <= 12; k++ {
		if (i+1)%k == 0 {
			words = append(words, fmt.Sprintf("w%02d", k))
		}
	}
	return words
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// startWordCount starts the application; each of configs is one more Streams config
// as KEY=VALUE.
func startWordCount(t *testing.T, bootstrap, app, in, out, guarantee string, configs ...string) *javaApp {
	t.Helper()
	args := append([]string{"-cp", streamsClassPath, "io.strata.interop.streams.WordCount",
		bootstrap, app, in, out, filepath.Join(t.TempDir(), "state"), guarantee}, configs...)
	return startJavaApp(t, "the Streams application", args...)
}
