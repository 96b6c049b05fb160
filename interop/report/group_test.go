package report

import (
	"strings"
	"testing"
)

// split hands each partition's reads to a member: partitions 0 and 1 to "a", 2 to "b".
func split(consumed []Consumed) map[string][]Consumed {
	m := map[string][]Consumed{}
	for _, c := range consumed {
		name := "a"
		if c.Partition == 2 {
			name = "b"
		}
		m[name] = append(m[name], c)
	}
	return m
}

// flagged reports whether errs holds an anomaly of class.
func flagged(errs []error, class string) bool {
	for _, err := range errs {
		if strings.HasPrefix(err.Error(), class+":") {
			return true
		}
	}
	return false
}

func TestCheckGroupCleanHistories(t *testing.T) {
	for _, c := range []struct {
		name    string
		members func(consumed []Consumed) map[string][]Consumed
	}{
		{"one member", func(c []Consumed) map[string][]Consumed { return map[string][]Consumed{"a": c} }},
		{"split by partition", split},
		{"partition handed over", func(c []Consumed) map[string][]Consumed {
			// "a" reads partition 0 up to offset 9, then "b" owns it from 10 on:
			// a rebalance after a commit.
			m := map[string][]Consumed{}
			for _, r := range c {
				name := "a"
				if r.Partition == 0 && r.Offset >= 10 {
					name = "b"
				}
				m[name] = append(m[name], r)
			}
			return m
		}},
		{"member gets a partition back", func(c []Consumed) map[string][]Consumed {
			// Partition 0: "a" reads 0-9, "b" 10-19, "a" again from 20: a forward skip.
			m := map[string][]Consumed{}
			for _, r := range c {
				name := "a"
				if r.Partition == 0 && r.Offset >= 10 && r.Offset < 20 {
					name = "b"
				}
				m[name] = append(m[name], r)
			}
			return m
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			produced, consumed := history(200, 20)
			if errs := CheckGroup(parts, produced, c.members(consumed)); errs != nil {
				t.Fatalf("clean group history flagged: %v", errs)
			}
		})
	}
}

func TestCheckGroupFlagsEachAnomaly(t *testing.T) {
	for _, c := range []struct {
		class string
		plant func(p []Produced, m map[string][]Consumed)
	}{
		{"duplicate", func(_ []Produced, m map[string][]Consumed) {
			m["b"] = append(m["b"], m["a"][0]) // read by both members
		}},
		{"duplicate", func(_ []Produced, m map[string][]Consumed) {
			m["b"] = append(m["b"], m["b"][len(m["b"])-1]) // read twice by one
		}},
		{"nonmonotonic-poll", func(_ []Produced, m map[string][]Consumed) {
			a := m["a"]
			a[1], a[2] = a[2], a[1]
		}},
		{"lost-write", func(_ []Produced, m map[string][]Consumed) {
			m["b"] = m["b"][:len(m["b"])-1]
		}},
		{"poll-skip", func(_ []Produced, m map[string][]Consumed) {
			m["b"] = append(m["b"][:3:3], m["b"][4:]...)
		}},
		{"corrupt", func(_ []Produced, m map[string][]Consumed) {
			m["b"][0].Value = []byte("v-9999")
		}},
		{"key-order", func(p []Produced, m map[string][]Consumed) {
			// Two records of one key on partition 2, contents swapped.
			b := m["b"]
			var same []int
			for i := range b {
				if string(b[i].Key) == string(b[0].Key) {
					same = append(same, i)
				}
			}
			i, j := same[0], same[1]
			b[i].Value, b[j].Value = b[j].Value, b[i].Value
			b[i].Headers, b[j].Headers = b[j].Headers, b[i].Headers
		}},
	} {
		t.Run(c.class, func(t *testing.T) {
			produced, consumed := history(200, 20)
			m := split(consumed)
			c.plant(produced, m)
			if errs := CheckGroup(parts, produced, m); !flagged(errs, c.class) {
				t.Fatalf("planted %s not flagged; got %v", c.class, errs)
			}
		})
	}
}

func TestCheckGroupDoesNotReorderInput(t *testing.T) {
	produced, consumed := history(60, 6)
	m := map[string][]Consumed{"a": consumed}
	first := consumed[0]
	consumed[0], consumed[len(consumed)-1] = consumed[len(consumed)-1], consumed[0]
	CheckGroup(parts, produced, m)
	if consumed[len(consumed)-1].Offset != first.Offset || consumed[len(consumed)-1].Partition != first.Partition {
		t.Fatal("CheckGroup reordered its caller's reads")
	}
}

func TestCheckAtLeastOnceAllowsRereads(t *testing.T) {
	produced, consumed := history(200, 20)
	// A rebalance before a commit: the first 5 reads of partition 0 come again later.
	var again []Consumed
	for _, c := range consumed {
		if c.Partition == 0 && c.Offset < 5 {
			again = append(again, c)
		}
	}
	consumed = append(consumed, again...)
	if errs := CheckAtLeastOnce(parts, produced, consumed); errs != nil {
		t.Fatalf("re-reads flagged: %v", errs)
	}
	if errs := Check(parts, produced, consumed); !flagged(errs, "duplicate") {
		t.Fatalf("Check must still call a re-read a duplicate; got %v", errs)
	}
}

func TestCheckAtLeastOnceFlagsEachAnomaly(t *testing.T) {
	for _, c := range []struct {
		class string
		plant func(p []Produced, c []Consumed) ([]Produced, []Consumed)
	}{
		{"duplicate", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			// Send 5 written a second time at the end of its partition.
			r := c[indexOf(p, c, 5)]
			var end int64
			for _, x := range c {
				if x.Partition == r.Partition {
					end = max(end, x.Offset+1)
				}
			}
			r.Offset = end
			return p, append(c, r)
		}},
		{"phantom", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			r := c[indexOf(p, c, 5)]
			r.Offset = 1000
			return p, append(c, r)
		}},
		{"inconsistent-offsets", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			r := c[0]
			r.Value = []byte("changed")
			return p, append(c, r)
		}},
		{"lost-write", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			return p, c[:len(c)-1]
		}},
		{"key-order", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			i, j := indexOf(p, c, 0), indexOf(p, c, 20)
			c[i].Value, c[j].Value = c[j].Value, c[i].Value
			c[i].Headers, c[j].Headers = c[j].Headers, c[i].Headers
			return p, c
		}},
		{"nonmonotonic-send", func(p []Produced, c []Consumed) ([]Produced, []Consumed) {
			p[0], p[20] = p[20], p[0]
			return p, c
		}},
	} {
		t.Run(c.class, func(t *testing.T) {
			produced, consumed := c.plant(history(200, 20))
			if errs := CheckAtLeastOnce(parts, produced, consumed); !flagged(errs, c.class) {
				t.Fatalf("planted %s not flagged; got %v", c.class, errs)
			}
		})
	}
}
