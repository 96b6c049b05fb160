package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-stream/strata/internal/keyhash"
)

const parts = 3

// history builds what a correct broker and a correct client would report: count sends
// over keys keys placed by the Java partitioner, offsets dense per partition, and a read
// that goes partition by partition.
func history(count, keys int) ([]Produced, []Consumed) {
	var produced []Produced
	next := map[int32]int64{}
	for i := range count {
		key := []byte(fmt.Sprintf("key-%02d", i%keys))
		p := keyhash.Partition(key, parts)
		hs := []Header{{"seq", []byte(fmt.Sprint(i))}, {"dup", []byte("a")}, {"dup", []byte("b")}}
		if i%10 == 0 {
			hs = append(hs, Header{"empty", []byte{}}, Header{"nil", nil})
		}
		produced = append(produced, Produced{Key: key, Value: []byte(fmt.Sprintf("v-%04d", i)), Headers: hs, Partition: p, Offset: next[p]})
		next[p]++
	}
	var consumed []Consumed
	for p := int32(0); p < parts; p++ {
		for o := int64(0); o < next[p]; o++ {
			for _, r := range produced {
				if r.Partition == p && r.Offset == o {
					consumed = append(consumed, Consumed{Partition: p, Offset: o, Key: r.Key, Value: r.Value, Headers: r.Headers})
				}
			}
		}
	}
	return produced, consumed
}

// indexOf finds the read of send i.
func indexOf(produced []Produced, consumed []Consumed, i int) int {
	for j, c := range consumed {
		if c.Partition == produced[i].Partition && c.Offset == produced[i].Offset {
			return j
		}
	}
	panic("send not read")
}

func TestCleanHistoryHasNoAnomaly(t *testing.T) {
	produced, consumed := history(200, 20)
	if errs := Check(parts, produced, consumed); errs != nil {
		t.Fatalf("clean history flagged: %v", errs)
	}
}

// TestFlagsEachAnomaly feeds Check histories with one planted anomaly each: a checker
// that cannot fail proves nothing.
func TestFlagsEachAnomaly(t *testing.T) {
	for _, c := range []struct {
		class string
		plant func(p []Produced, c []Consumed) ([]Produced, []Consumed)
	}{
		{"lost-write", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			j := indexOf(p, c, 5)
			// Drop the last read of that partition, so the offsets read stay dense.
			for k := len(c) - 1; k >= 0; k-- {
				if c[k].Partition == c[j].Partition {
					return p, append(c[:k:k], c[k+1:]...)
				}
			}
			return p, c
		}},
		{"duplicate", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			return p, append(c, c[len(c)-1])
		}},
		{"phantom", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			last := c[len(c)-1]
			return p, append(c, Consumed{Partition: last.Partition, Offset: last.Offset + 1, Key: last.Key, Value: []byte("ghost")})
		}},
		{"corrupt", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			c[indexOf(p, c, 3)].Value = []byte("v-9999")
			return p, c
		}},
		{"corrupt", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			// An empty header value read back as null must not pass.
			j := indexOf(p, c, 10)
			hs := append([]Header(nil), c[j].Headers...)
			hs[3].Value = nil
			c[j].Headers = hs
			return p, c
		}},
		{"corrupt", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			j := indexOf(p, c, 7)
			hs := append([]Header(nil), c[j].Headers...)
			hs[1], hs[2] = hs[2], hs[1] // repeated header key, order swapped
			c[j].Headers = hs
			return p, c
		}},
		{"poll-skip", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			return p, append(c[:1:1], c[2:]...)
		}},
		{"nonmonotonic-poll", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			c[1], c[2] = c[2], c[1]
			return p, c
		}},
		{"inconsistent-offsets", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			// Two sends of one key claim one offset.
			p[20].Offset = p[0].Offset
			return p, c
		}},
		{"nonmonotonic-send", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			p[0], p[20] = p[20], p[0] // same key, acknowledged offsets now decrease
			return p, c
		}},
		{"wrong-partition", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			for i := range p {
				p[i].Partition = (p[i].Partition + 1) % parts
			}
			for i := range c {
				c[i].Partition = (c[i].Partition + 1) % parts
			}
			return p, c
		}},
		{"key-order", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			// Sends 0 and 20 share a key; read them in swapped positions.
			i, j := indexOf(p, c, 0), indexOf(p, c, 20)
			c[i].Value, c[j].Value = c[j].Value, c[i].Value
			c[i].Headers, c[j].Headers = c[j].Headers, c[i].Headers
			return p, c
		}},
	} {
		t.Run(c.class, func(t *testing.T) {
			produced, consumed := c.plant(history(200, 20))
			errs := Check(parts, produced, consumed)
			found := false
			for _, err := range errs {
				found = found || strings.HasPrefix(err.Error(), c.class+":")
			}
			if !found {
				t.Fatalf("planted %s not flagged; got %v", c.class, errs)
			}
		})
	}
}

func TestCheckBoundsItsAnswer(t *testing.T) {
	produced, _ := history(200, 20)
	if errs := Check(parts, produced, nil); len(errs) != maxAnomalies {
		t.Fatalf("got %d anomalies for 200 lost writes, want the first %d", len(errs), maxAnomalies)
	}
}

func TestNullKeysSkipPartitionCheck(t *testing.T) {
	produced := []Produced{{Value: []byte("x"), Partition: 2, Offset: 0}}
	consumed := []Consumed{{Partition: 2, Offset: 0, Value: []byte("x")}}
	if errs := Check(parts, produced, consumed); errs != nil {
		t.Fatalf("null-key record flagged: %v", errs)
	}
}

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"summary", `{"client":"java","library":"x","topic":"t","produced":[{"key":"aw==","value":null,"headers":[{"key":"h","value":""}],"partition":1,"offset":2}],"consumed":[]}` + "\n", true},
		{"trailing output", `{"client":"java","produced":[]} {"client":"again"}`, false},
		{"garbage", `Exception in thread "main"`, false},
		{"empty", ``, false},
		{"unknown field", `{"client":"java","produced":[],"surprise":1}`, false},
		{"bad base64", `{"client":"java","produced":[{"key":"!!"}]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Decode(strings.NewReader(c.in))
			if (err == nil) != c.ok {
				t.Fatalf("Decode: err = %v, want ok=%v", err, c.ok)
			}
			if c.ok {
				r := s.Produced[0]
				if string(r.Key) != "k" || r.Value != nil || r.Headers[0].Value == nil || len(r.Headers[0].Value) != 0 {
					t.Fatalf("decoded %+v: null and empty not kept apart", r)
				}
			}
		})
	}
}

func TestDecodeGroupAndStreamFields(t *testing.T) {
	in := `{"client":"java","library":"x","topic":"t","produced":[],"consumed":[],` +
		`"failed":[{"key":"aw==","value":"dg==","headers":[],"error":"timed out"}],` +
		`"group":"g","assignments":[[0,2],[],[0,1,2]]}`
	s, err := Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.Group != "g" || len(s.Assignments) != 3 || len(s.Assignments[1]) != 0 || s.Assignments[2][2] != 2 {
		t.Fatalf("group fields decoded as %q %v", s.Group, s.Assignments)
	}
	if len(s.Failed) != 1 || string(s.Failed[0].Value) != "v" || s.Failed[0].Error != "timed out" {
		t.Fatalf("failed sends decoded as %+v", s.Failed)
	}
}
