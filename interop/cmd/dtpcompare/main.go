// Command dtpcompare sends the same DescribeTopicPartitions requests (key 75) to a
// Kafka broker and a Strata broker and prints, case by case, what each answers
// (topics in order with their error codes, partitions, cursors and authorized
// operations), marking the cases where they differ. It is how the expected values
// of internal/handlers' DescribeTopicPartitions table were taken from Kafka 4.4.
//
// Both brokers must be set up as for sharecompare (interop/README.md): SASL PLAIN,
// an ACL authorizer, a super user admin and a plain user alice.
//
//	go run ./interop/cmd/dtpcompare -kafka 127.0.0.1:9192 -strata 127.0.0.1:9292
//
// The exit status is 1 when any case differs.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-stream/strata/interop/cmd/internal/sidebyside"
)

func main() {
	prefix := fmt.Sprintf("dtp%06d-", rand.IntN(1e6))
	sidebyside.Main("dtpcompare", 2*time.Minute, func(ctx context.Context, addr string) ([]sidebyside.Result, error) {
		return runAll(ctx, addr, prefix)
	})
}

// A case names topics by suffix: a (3 partitions), b (1), c (2) and d (1) exist,
// alice may DESCRIBE a, b and c only; x does not exist; "bad name" is invalid.
type testCase struct {
	name   string
	user   string
	topics []string // nil: every topic (the cursor then starts at a's prefix)
	limit  int32
	cursor *kmsg.DescribeTopicPartitionsRequestCursor // Topic is a suffix
}

func cur(topic string, p int32) *kmsg.DescribeTopicPartitionsRequestCursor {
	return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: p}
}

var cases = []testCase{
	{"named, unordered, a duplicate", "admin", []string{"c", "a", "b", "a"}, 100, nil},
	{"limit inside a topic", "admin", []string{"a", "b", "c"}, 2, nil},
	{"limit at a topic's end", "admin", []string{"a", "b", "c"}, 3, nil},
	{"from a cursor", "admin", []string{"a", "b", "c"}, 2, cur("a", 2)},
	{"cursor past the last partition", "admin", []string{"a", "b"}, 10, cur("a", 7)},
	{"limit reached before an unknown topic", "admin", []string{"a", "x", "b"}, 3, nil},
	{"unknown and invalid topics", "admin", []string{"x", "bad name", "b"}, 10, nil},
	{"limit 0 is 1", "admin", []string{"a"}, 0, nil},
	{"negative limit is 1", "admin", []string{"b", "a"}, -5, nil},
	{"cursor topic not named", "admin", []string{"a", "b", "a"}, 10, cur("c", 0)},
	{"negative cursor partition", "admin", []string{"a", "b"}, 10, cur("a", -1)},
	{"every topic", "admin", nil, 100, cur("a", 0)},
	{"every topic, paged", "admin", nil, 4, cur("a", 1)},
	{"every topic, negative cursor partition", "admin", nil, 10, cur("a", -1)},
	{"alice: named, one denied", "alice", []string{"d", "a", "x", "b"}, 100, nil},
	{"alice: denied topics after the page", "alice", []string{"a", "b", "d"}, 2, nil},
	{"alice: every topic", "alice", nil, 100, cur("a", 0)},
	{"alice: denied cursor topic", "alice", []string{"a", "d"}, 100, cur("d", 0)},
}

func runAll(ctx context.Context, addr, prefix string) ([]sidebyside.Result, error) {
	login := func(user string) (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(5*time.Second),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()))
	}
	admin, err := login("admin")
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	alice, err := login("alice")
	if err != nil {
		return nil, err
	}
	defer alice.Close()
	adm := kadm.NewClient(admin)
	for _, t := range []struct {
		suffix string
		n      int32
	}{{"a", 3}, {"b", 1}, {"c", 2}, {"d", 1}} {
		if _, err := adm.CreateTopic(ctx, t.n, 1, nil, prefix+t.suffix); err != nil {
			return nil, err
		}
	}
	acls := kadm.NewACLs().Allow("User:alice").Topics(prefix+"a", prefix+"b", prefix+"c").
		Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := adm.CreateACLs(ctx, acls); err != nil {
		return nil, fmt.Errorf("ACLs: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for { // the topics have leaders and the ACLs reached the broker
		md, err := adm.Metadata(ctx, prefix+"a", prefix+"d")
		ready := err == nil && md.Topics[prefix+"a"].Err == nil && md.Topics[prefix+"d"].Err == nil
		if ready {
			for _, p := range md.Topics[prefix+"a"].Partitions {
				ready = ready && p.Leader >= 0
			}
		}
		if ready {
			resp, err := request(ctx, alice, prefix, testCase{topics: []string{"c"}, limit: 1})
			ready = err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topics or ACLs not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var outs []sidebyside.Result
	for _, c := range cases {
		cl := admin
		if c.user == "alice" {
			cl = alice
		}
		resp, err := request(ctx, cl, prefix, c)
		if err != nil {
			outs = append(outs, sidebyside.Result{Name: c.name, Out: "error: " + err.Error()})
			continue
		}
		outs = append(outs, sidebyside.Result{Name: c.name, Out: render(resp, prefix)})
	}
	return outs, nil
}

func request(ctx context.Context, cl *kgo.Client, prefix string, c testCase) (*kmsg.DescribeTopicPartitionsResponse, error) {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = c.limit
	for _, t := range c.topics {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: prefix + t})
	}
	if c.cursor != nil {
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: prefix + c.cursor.Topic, Partition: c.cursor.Partition}
	}
	return req.RequestWith(ctx, cl)
}

// render is an answer with the run's prefix cut from topic names and topics of
// other runs (and internal topics) left out.
func render(resp *kmsg.DescribeTopicPartitionsResponse, prefix string) string {
	// Kafka lists the denied topics last in a hash set's order: sort them.
	topics := slices.Clone(resp.Topics)
	denied := len(topics)
	for denied > 0 && topics[denied-1].ErrorCode == kerr.TopicAuthorizationFailed.Code {
		denied--
	}
	slices.SortFunc(topics[denied:], func(a, b kmsg.DescribeTopicPartitionsResponseTopic) int {
		return strings.Compare(*a.Topic, *b.Topic)
	})
	var b strings.Builder
	for _, t := range topics {
		name := "<null>"
		if t.Topic != nil {
			name = *t.Topic
		}
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		fmt.Fprintf(&b, "%s", strings.TrimPrefix(name, prefix))
		if t.ErrorCode != 0 {
			fmt.Fprintf(&b, " %s", kerr.ErrorForCode(t.ErrorCode).(*kerr.Error).Message)
		}
		if t.TopicID != [16]byte{} {
			b.WriteString(" id")
		}
		fmt.Fprintf(&b, " ops=%#x [", uint32(t.AuthorizedOperations))
		for i, p := range t.Partitions {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:err%d,leader%v,epoch%d,r%v,isr%v,elr%s,lke%s,off%v", p.Partition, p.ErrorCode,
				p.LeaderID >= 0, p.LeaderEpoch, len(p.Replicas), len(p.ISR), list(p.EligibleLeaderReplicas),
				list(p.LastKnownELR), len(p.OfflineReplicas))
		}
		b.WriteString("]; ")
	}
	if c := resp.NextCursor; c != nil {
		fmt.Fprintf(&b, "next %s/%d", strings.TrimPrefix(c.Topic, prefix), c.Partition)
	} else {
		b.WriteString("no next")
	}
	return b.String()
}

func list(s []int32) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprint(s)
}
