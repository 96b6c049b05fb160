package server

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-stream/strata/internal/config"
	"github.com/strata-stream/strata/internal/share"
	"github.com/strata-stream/strata/internal/wait"
)

// round2Fixture was written by `strata server` of main at 551340b
// (2026-12-03) through testdata/mkfixture, which holds the exact commands and
// the server flags (round2Config repeats them):
//
//   - orders (2 partitions, retention.ms=604800000, max.message.bytes=65536):
//     k1:v1..k6:v6, one batch each, partitioned by key hash (k3 k4 k5 in 0).
//   - payments: committed c1 c2 (offsets 0-1, marker 2), aborted a1 a2 (3-4,
//     marker 5), committed c3 (6, marker 7), o1 (8) of transactional id open-tx
//     (timeout 60 s) left open, then the plain record p1 (9).
//   - profiles (compacted, internal.segment.bytes=2048): u1..u4 three times
//     (offsets 0-11), a tombstone of u2 (12), u9 eight times (13-20), cleaned
//     once (up to 15), then u5 (21).
//   - scratch: created, written and deleted.
//   - classic-g (classic protocol) and modern-g (KIP-848 consumer protocol)
//     consumed all of orders and committed.
//   - share-g (share.auto.offset.reset=earliest) was handed t0..t5 of tasks,
//     accepted t0..t2 and still held t3..t5 when the node stopped.
//   - SCRAM users admin (SHA-256, super user) and alice (SHA-512); alice may
//     read and describe orders and group alice-g, and is denied payments.
//   - a delegation token of admin (expiry and max lifetime 876000 h); quotas
//     producer_byte_rate=1024 of client id slow and consumer_byte_rate=2048
//     of user alice.
const round2Fixture = "testdata/datadir-551340b.tgz"

// round2TopicIDs are the topic ids mkfixture printed.
var round2TopicIDs = map[string]string{
	"__consumer_offsets":  "9c6cf64d7e89476abd3611329287de7e",
	"__share_group_state": "579d3099e6c3449aad7bfec040b8eaf8",
	"__transaction_state": "30ac1021026a4b87960efe070eda192f",
	"orders":              "9471156ac46647fd85aaad256f1c1a41",
	"payments":            "4fe33c16f5f2418d933a6d523ff4e7c6",
	"profiles":            "d5166f135dae4c1eb8c2b9bc7c78c535",
	"tasks":               "5621e80cb7a14be0a357d0516d47bb6d",
}

// round2Config is the configuration the fixture's node ran with.
func round2Config(dataDir string) config.Config {
	cfg := nodeConfig(dataDir)
	cfg.OffsetsTopicPartition, cfg.TransactionStatePartitions, cfg.ShareStatePartitions = 1, 1, 1
	cfg.GroupInitialDelay = 0
	cfg.SASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"
	cfg.InterBrokerSASL = "SCRAM-SHA-512=[name=broker,password=broker-secret]"
	cfg.Authorizer, cfg.SuperUsers = "acl", "User:admin,User:broker"
	cfg.DelegationTokenSecretKey = "fixture-token-secret"
	cfg.DelegationTokenMaxLifetime, cfg.DelegationTokenExpiryTime = 876000*time.Hour, 876000*time.Hour
	return cfg
}

// TestOpensRound2DataDir opens the data directory main wrote at 551340b with
// the new code and checks every durable format it holds: logs and their
// offsets, transactions, compaction, both kinds of groups' offsets, the share
// group's state, ACLs, SCRAM credentials, a delegation token, configs, quotas
// and topic ids.
func TestOpensRound2DataDir(t *testing.T) {
	dir := t.TempDir()
	extractTarGz(t, round2Fixture, dir)
	dataDir := filepath.Join(dir, "data")
	n := startNode(t, round2Config(dataDir))
	checkRound2(t, n, dataDir, round2Facts)
}

// fixtureFacts are what checkRound2 needs to know of a fixture beside what
// every fixture since the second holds alike.
type fixtureFacts struct {
	topicIDs map[string]string // the ids mkfixture printed
	written  time.Time         // the day mkfixture ran: the delegation token's issue day
	// modernGroup is the type modern-g (KIP-848, empty when the node stopped)
	// is listed with: "classic" from a fixture written before session 19
	// persisted consumer groups (only its offsets were kept), "consumer" since.
	modernGroup string
}

// round2Facts are round2Fixture's.
var round2Facts = fixtureFacts{topicIDs: round2TopicIDs, written: time.Date(2026, time.December, 3, 0, 0, 0, 0, time.UTC), modernGroup: "classic"}

// checkRound2 checks, on node n started on dataDir, every item of the second
// fixture, which later fixtures hold too.
func checkRound2(t *testing.T, n *testNode, dataDir string, f fixtureFacts) {
	admin, adm := n.client(t, scramAuth("admin", "admin-secret", false))
	ctx := t.Context()
	topicIDs := f.topicIDs

	t.Run("topics", func(t *testing.T) { checkRound2Topics(t, ctx, admin, adm, dataDir, topicIDs) })
	t.Run("orders", func(t *testing.T) { checkRound2Orders(t, ctx, n, admin) })
	t.Run("transactions", func(t *testing.T) { checkRound2Transactions(t, ctx, n, admin, adm) })
	t.Run("compaction", func(t *testing.T) { checkRound2Compaction(t, ctx, n) })
	t.Run("groups", func(t *testing.T) { checkRound2Groups(t, ctx, admin, adm, f.modernGroup) })
	t.Run("share group", func(t *testing.T) { checkRound2ShareGroup(t, admin, topicIDs["tasks"]) })
	t.Run("security", func(t *testing.T) { checkRound2Security(t, ctx, n, admin, adm, f.written) })
	t.Run("quotas", func(t *testing.T) { checkRound2Quotas(t, ctx, adm) })
}

func scramAuth(user, password string, sha512 bool) kgo.Opt {
	auth := scram.Auth{User: user, Pass: password}
	if sha512 {
		return kgo.SASL(auth.AsSha512Mechanism())
	}
	return kgo.SASL(auth.AsSha256Mechanism())
}

// checkRound2Topics: the topic ids are those the old main gave, the deleted
// topic stays deleted (and its directory gone), and configs are kept.
func checkRound2Topics(t *testing.T, ctx context.Context, admin *kgo.Client, adm *kadm.Client, dataDir string, topicIDs map[string]string) {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tp := range meta.Topics {
		got[*tp.Topic] = hex.EncodeToString(tp.TopicID[:])
	}
	if fmt.Sprint(got) != fmt.Sprint(topicIDs) {
		t.Fatalf("topics and ids after the upgrade:\n%v\nwant\n%v", got, topicIDs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "logs", "scratch-0")); !os.IsNotExist(err) {
		t.Fatalf("the deleted topic's directory: %v", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "orders", "profiles")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string][][2]string{
		"orders":   {{"retention.ms", "604800000"}, {"max.message.bytes", "65536"}},
		"profiles": {{"cleanup.policy", "compact"}, {"delete.retention.ms", "31536000000"}, {"min.cleanable.dirty.ratio", "0.01"}},
	} {
		c, err := configs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range want {
			if !hasConfig(c.Configs, kv[0], kv[1]) {
				t.Errorf("%s's %s after the upgrade: want %s in %+v", topic, kv[0], kv[1], c.Configs)
			}
		}
	}
}

// readAll reads a partition from the start until it has a record at offset
// last or later, returning "offset key:value" strings ("key:<nil>" for a tombstone, a value
// cut at its first "|").
func readAll(t *testing.T, ctx context.Context, n *testNode, topic string, partition int32, last int64, opts ...kgo.Opt) []string {
	t.Helper()
	opts = append([]kgo.Opt{scramAuth("admin", "admin-secret", false), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	})}, opts...)
	cl, _ := n.client(t, opts...)
	defer cl.Close()
	var got []string
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for next := int64(0); next <= last; {
		fs := cl.PollFetches(pctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s-%d: %v (so far %v)", topic, partition, err, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			v, _, _ := strings.Cut(string(r.Value), "|") // profiles' padding
			if r.Value == nil {
				v = "<nil>"
			}
			got = append(got, fmt.Sprintf("%d %s:%s", r.Offset, r.Key, v))
		})
	}
	return got
}

// checkRound2Orders: every record at its offset, and the log takes new ones.
func checkRound2Orders(t *testing.T, ctx context.Context, n *testNode, admin *kgo.Client) {
	for p, want := range map[int32][]string{0: {"0 k3:v3", "1 k4:v4", "2 k5:v5"}, 1: {"0 k1:v1", "1 k2:v2", "2 k6:v6"}} {
		if got := readAll(t, ctx, n, "orders", p, 2); !slices.Equal(got, want) {
			t.Fatalf("orders-%d after the upgrade: %v, want %v", p, got, want)
		}
	}
	producer, _ := n.client(t, scramAuth("admin", "admin-secret", false), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("k7"), Value: []byte("v7")}).FirstErr(); err != nil {
		t.Fatalf("producing after the upgrade: %v", err)
	}
	if got := readAll(t, ctx, n, "orders", 1, 3); len(got) != 4 || got[3] != "3 k7:v7" {
		t.Fatalf("orders-1 after a new produce: %v", got)
	}
}

// checkRound2Transactions: open-tx's transaction, open when the node stopped
// long past its 60 s timeout, holds the last stable offset at its first
// offset (8) until the coordinator, having loaded it from
// __transaction_state, aborts it as Kafka does with an expired transaction;
// read_committed then sees exactly the committed records. The committed
// transactional id goes on working.
func checkRound2Transactions(t *testing.T, ctx context.Context, n *testNode, admin *kgo.Client, adm *kadm.Client) {
	wait.Eventually(t, 60*time.Second, "the expired open transaction to be aborted", func() error {
		lso, err := endOffset(ctx, adm.ListCommittedOffsets)
		if err != nil {
			return err // the partition may have no leader yet
		}
		if lso != 8 && lso != 11 {
			t.Fatalf("payments' last stable offset %d, want 8 (open transaction) or 11 (aborted)", lso)
		}
		if lso != 11 {
			return fmt.Errorf("last stable offset %d", lso)
		}
		return nil
	})
	if hwm, err := endOffset(ctx, adm.ListEndOffsets); err != nil || hwm != 11 {
		t.Fatalf("payments' high-water mark %d (%v), want 11 (the abort marker at 10)", hwm, err)
	}
	committed := readAll(t, ctx, n, "payments", 0, 9, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if want := []string{"0 :c1", "1 :c2", "6 :c3", "9 :p1"}; !slices.Equal(committed, want) {
		t.Fatalf("payments read_committed after the upgrade: %v, want %v", committed, want)
	}
	all := readAll(t, ctx, n, "payments", 0, 9)
	if want := []string{"0 :c1", "1 :c2", "3 :a1", "4 :a2", "6 :c3", "8 :o1", "9 :p1"}; !slices.Equal(all, want) {
		t.Fatalf("payments read_uncommitted after the upgrade: %v, want %v", all, want)
	}
	described, err := adm.DescribeTransactions(ctx, "committer", "aborter", "open-tx")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"committer": "CompleteCommit", "aborter": "CompleteAbort", "open-tx": "CompleteAbort"} {
		d, ok := described[id]
		if !ok || d.Err != nil || d.State != want {
			t.Errorf("transaction %s after the upgrade: %+v, want state %s", id, d, want)
		}
	}
	tx, _ := n.client(t, scramAuth("admin", "admin-secret", false), kgo.TransactionalID("committer"), kgo.DefaultProduceTopic("payments"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, kgo.StringRecord("c4")).FirstErr(); err != nil {
		t.Fatalf("a transaction of committer after the upgrade: %v", err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing after the upgrade: %v", err)
	}
	if got := readAll(t, ctx, n, "payments", 0, 11, kgo.FetchIsolationLevel(kgo.ReadCommitted())); !slices.Contains(got, "11 :c4") {
		t.Fatalf("payments after a new transaction: %v", got)
	}
}

// endOffset returns payments-0's last stable offset (list = ListCommittedOffsets)
// or high-water mark (list = ListEndOffsets).
func endOffset(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
	offsets, err := list(ctx, "payments")
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		return 0, err
	}
	o, ok := offsets.Lookup("payments", 0)
	if !ok {
		return 0, fmt.Errorf("no offset of payments-0 in %+v", offsets)
	}
	return o.Offset, nil
}

// checkRound2Compaction: the section cleaned once keeps only each key's
// newest record, the tombstone included; the dirty section is untouched.
func checkRound2Compaction(t *testing.T, ctx context.Context, n *testNode) {
	got := readAll(t, ctx, n, "profiles", 0, 21)
	// The pass cleaned [0, 15): each key's newest record there, u2's
	// tombstone (kept for delete.retention.ms) in place of u2-v3.
	want := []string{"8 u1:u1-v3", "10 u3:u3-v3", "11 u4:u4-v3", "12 u2:<nil>", "14 u9:u9-v1",
		"15 u9:u9-v2", "16 u9:u9-v3", "17 u9:u9-v4", "18 u9:u9-v5", "19 u9:u9-v6", "20 u9:u9-v7", "21 u5:u5-v1"}
	if !slices.Equal(got, want) {
		t.Fatalf("profiles after the upgrade:\n%v\nwant\n%v", got, want)
	}
}

// checkRound2Groups: both groups' committed offsets, and each group's type,
// modern-g's modernGroup (fixtureFacts).
func checkRound2Groups(t *testing.T, ctx context.Context, admin *kgo.Client, adm *kadm.Client, modernGroup string) {
	for _, g := range []string{"classic-g", "modern-g"} {
		var offsets kadm.OffsetResponses
		wait.Eventually(t, 30*time.Second, g+"'s committed offsets", func() error {
			var err error
			offsets, err = adm.FetchOffsets(ctx, g)
			if err == nil {
				err = offsets.Error()
			}
			return err
		})
		for p := range int32(2) {
			if o, ok := offsets.Lookup("orders", p); !ok || o.At != 3 {
				t.Fatalf("%s's committed offset of orders-%d: %+v, want 3", g, p, o)
			}
		}
	}
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, g := range resp.Groups {
		types[g.Group] = g.GroupType
	}
	for g, want := range map[string]string{"classic-g": "classic", "modern-g": modernGroup, "share-g": "share"} {
		if types[g] != want {
			t.Errorf("group %s's type after the upgrade: %q, want %q (all: %v)", g, types[g], want, types)
		}
	}
}

// checkRound2ShareGroup: t0..t2 were accepted, so a member of share-g gets
// t3..t5 next, delivered a second time (the acquisition of the first
// delivery ended with the node), and nothing else until more is produced.
func checkRound2ShareGroup(t *testing.T, admin *kgo.Client, tasksID string) {
	id, err := hex.DecodeString(tasksID)
	if err != nil {
		t.Fatal(err)
	}
	m := joinShareGroup(t, admin, "share-g", "member-after-upgrade", "tasks", [16]byte(id))
	var got []acquired
	wait.For(t, "share-g's next records", func() bool {
		got = append(got, m.fetch(time.Second)...)
		return len(got) >= 3
	})
	var desc []string
	for _, a := range got {
		desc = append(desc, fmt.Sprintf("%d %s x%d", a.offset, a.rec.Value, a.count))
	}
	if want := []string{"3 t3 x2", "4 t4 x2", "5 t5 x2"}; !slices.Equal(desc, want) {
		t.Fatalf("share-g's records after the upgrade: %v, want %v", desc, want)
	}
	for _, a := range got {
		if code := m.ack(a.offset, share.Accept); code != 0 {
			t.Fatalf("acknowledging offset %d: error %d", a.offset, code)
		}
	}
	if more := m.fetch(200 * time.Millisecond); len(more) != 0 {
		t.Fatalf("share-g got records already accepted: %+v", more)
	}
}

// checkRound2Security: the SCRAM users log in with their passwords (and not
// with another), alice's ACLs are enforced, the delegation token is kept.
func checkRound2Security(t *testing.T, ctx context.Context, n *testNode, admin *kgo.Client, adm *kadm.Client, written time.Time) {
	alice, _ := n.client(t, scramAuth("alice", "alice-secret", true))
	meta := kmsg.NewPtrMetadataRequest()
	for _, topic := range []string{"orders", "payments"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		meta.Topics = append(meta.Topics, rt)
	}
	resp, err := meta.RequestWith(ctx, alice)
	if err != nil {
		t.Fatalf("alice's Metadata after the upgrade: %v", err)
	}
	codes := map[string]int16{}
	for _, tp := range resp.Topics {
		codes[*tp.Topic] = tp.ErrorCode
	}
	if codes["orders"] != 0 || codes["payments"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's topic errors after the upgrade: %v, want orders allowed and payments %d", codes, kerr.TopicAuthorizationFailed.Code)
	}
	if got := readAll(t, ctx, n, "orders", 0, 2, scramAuth("alice", "alice-secret", true)); len(got) != 3 {
		t.Fatalf("alice reading orders-0: %v", got)
	}
	wrong, _ := n.client(t, scramAuth("alice", "not-her-password", true))
	if err := wrong.Ping(ctx); err == nil {
		t.Fatal("alice logged in with a wrong password")
	}
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	acls, err := describe.RequestWith(ctx, admin)
	if err != nil || acls.ErrorCode != 0 {
		t.Fatalf("DescribeACLs: %v %+v", err, acls)
	}
	var bindings []string
	for _, r := range acls.Resources {
		for _, a := range r.ACLs {
			bindings = append(bindings, fmt.Sprintf("%s %s %s %s %s", a.Principal, a.PermissionType, a.Operation, r.ResourceType, r.ResourceName))
		}
	}
	slices.Sort(bindings)
	want := []string{
		"User:alice ALLOW DESCRIBE GROUP alice-g", "User:alice ALLOW DESCRIBE TOPIC orders",
		"User:alice ALLOW READ GROUP alice-g", "User:alice ALLOW READ TOPIC orders",
		"User:alice DENY ALL TOPIC payments",
	}
	if !slices.Equal(bindings, want) {
		t.Fatalf("ACLs after the upgrade:\n%v\nwant\n%v", bindings, want)
	}
	tokens, err := adm.DescribeDelegationTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0].Owner.Name != "admin" {
		t.Fatalf("delegation tokens after the upgrade: %+v, want one of admin", tokens)
	}
	// Issued while the fixture was written, for the node's 876000 h lifetime.
	tok := tokens[0]
	if y, m, d := tok.IssueTimestamp.UTC().Date(); y != written.Year() || m != written.Month() || d != written.Day() ||
		tok.ExpiryTimestamp.Sub(tok.IssueTimestamp) != 876000*time.Hour || !tok.MaxTimestamp.Equal(tok.ExpiryTimestamp) {
		t.Fatalf("delegation token's times after the upgrade: issued %v, expires %v, max %v", tok.IssueTimestamp, tok.ExpiryTimestamp, tok.MaxTimestamp)
	}
}

func checkRound2Quotas(t *testing.T, ctx context.Context, adm *kadm.Client) {
	quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range quotas {
		for _, v := range q.Values {
			got = append(got, fmt.Sprintf("%s=%s %s=%g", q.Entity[0].Type, *q.Entity[0].Name, v.Key, v.Value))
		}
	}
	slices.Sort(got)
	if want := []string{"client-id=slow producer_byte_rate=1024", "user=alice consumer_byte_rate=2048"}; !slices.Equal(got, want) {
		t.Fatalf("quotas after the upgrade: %v, want %v", got, want)
	}
}
