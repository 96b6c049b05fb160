// Command mkfixture writes the data-directory fixture that the upgrade tests
// (internal/server/upgrade_round*_test.go) open: it starts the given strata
// binary on a fresh directory with a file:// remote store beside it, fills
// them with real clients, stops the node with SIGTERM and packs both
// directories ("data" and "remote") into a gzipped tar file. It takes a few
// minutes: the controller snapshots its Raft log only on its own timer.
//
//	go build -o /tmp/strata-old ./cmd/strata   # at the commit to preserve
//	go run ./internal/server/testdata/mkfixture -strata /tmp/strata-old \
//	    -out internal/server/testdata/datadir-<commit>.tgz
//
// It prints the topic ids, offsets, Raft indexes, the streams group and the
// KIP-848 consumer group the test checks. Everything it writes is listed in the test's comment; change
// both together.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	adminUser, adminPassword = "admin", "admin-secret"
	aliceUser, alicePassword = "alice", "alice-secret"
	tokenSecret              = "fixture-token-secret"
)

func main() {
	bin := flag.String("strata", "", "strata binary that writes the directory")
	out := flag.String("out", "", "gzipped tar file to write")
	flag.Parse()
	if *bin == "" || *out == "" {
		log.Fatal("usage: mkfixture -strata BIN -out FILE.tgz")
	}
	tmp, err := os.MkdirTemp("", "mkfixture")
	if err != nil {
		log.Fatal(err)
	}
	err = run(*bin, tmp, *out)
	os.RemoveAll(tmp) // before log.Fatal, which skips deferred calls
	if err != nil {
		log.Fatal(err)
	}
}

// ServerFlags are the flags the fixture's node ran with; the test starts the
// new code with the same settings (the remote store at its extracted path).
func serverFlags(dataDir, remoteDir, kafka, http, ctrl string) []string {
	return []string{"server", "--data-dir", dataDir, "--remote-storage", "file://" + remoteDir,
		"--kafka-addr", kafka, "--http-addr", http, "--controller-addr", ctrl,
		"--offsets-topic-partitions", "1", "--transaction-state-partitions", "1",
		"--share-state-partitions", "1", "--log-cleanup-interval", "500ms",
		"--group-initial-rebalance-delay", "0s",
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512",
		"--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", adminUser, adminPassword),
		"--inter-broker-sasl", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
		"--authorizer", "acl", "--super-users", "User:" + adminUser + ",User:broker",
		"--delegation-token-secret-key", tokenSecret,
		"--delegation-token-max-lifetime", "876000h", "--delegation-token-expiry-time", "876000h",
	}
}

// run writes the fixture under root (root/data, root/remote) and packs it.
func run(bin, root, out string) error {
	dataDir := filepath.Join(root, "data")
	kafka := freeAddr()
	cmd := exec.Command(bin, serverFlags(dataDir, filepath.Join(root, "remote"), kafka, freeAddr(), freeAddr())...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	// The controller looks for a snapshot to take every 2 to 4 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	admin := client(kafka, adminUser, adminPassword, false)
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if err := until(ctx, "the node to answer", func() error {
		_, err := adm.ListBrokers(ctx)
		return err
	}); err != nil {
		return err
	}
	held, err := fill(ctx, kafka, admin, adm, dataDir)
	if err != nil {
		return err
	}
	defer held.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("strata server after SIGTERM: %w", err)
	}
	if err := printSnapshots(dataDir); err != nil {
		return err
	}
	return writeTarGz(root, out)
}

// fill writes every item of the fixture. The metadata (topics, the deleted
// topic, security, quotas) comes first and is then pushed out of the
// controller's Raft log into a snapshot; the records and groups follow, the
// ones whose members or transactions would time out during that wait last.
// It returns the share consumer, which still holds its
// delivered-but-unacknowledged records: the node must stop before it closes.
func fill(ctx context.Context, kafka string, admin *kgo.Client, adm *kadm.Client, dataDir string) (*kgo.Client, error) {
	steps := []struct {
		name string
		fn   func() error
	}{
		{"topics", func() error { return createTopics(ctx, adm) }},
		{"deleted topic", func() error { return deletedTopic(ctx, admin, adm) }},
		{"security", func() error { return security(ctx, adm) }},
		{"quotas", func() error { return quotas(ctx, adm) }},
		{"snapshot", func() error { return snapshot(ctx, admin, adm, dataDir) }},
		{"orders", func() error { return produceOrders(ctx, admin) }},
		{"transactions", func() error { return transactions(ctx, kafka) }},
		{"compaction", func() error { return compacted(ctx, admin, dataDir) }},
		{"groups", func() error { return groups(ctx, kafka) }},
		{"tiered", func() error { return tiered(ctx, admin, adm) }},
		{"streams group", func() error { return streamsGroup(ctx, kafka, admin) }},
		{"consumer group", func() error { return consumerGroup(ctx, admin) }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	held, err := shareGroup(ctx, kafka, admin)
	if err != nil {
		return nil, fmt.Errorf("share group: %w", err)
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
	if err != nil {
		held.Close()
		return nil, err
	}
	for _, t := range meta.Topics {
		fmt.Printf("topic %s id %x\n", *t.Topic, t.TopicID)
	}
	return held, nil
}

func createTopics(ctx context.Context, adm *kadm.Client) error {
	ptr := kadm.StringPtr
	for _, t := range []struct {
		name       string
		partitions int32
		configs    map[string]*string
	}{
		{"orders", 2, map[string]*string{"retention.ms": ptr("604800000"), "max.message.bytes": ptr("65536")}},
		{"payments", 1, nil},
		{"profiles", 1, map[string]*string{"cleanup.policy": ptr("compact"), "internal.segment.bytes": ptr("2048"),
			"min.cleanable.dirty.ratio": ptr("0.01"), "delete.retention.ms": ptr("31536000000")}},
		{"tasks", 1, nil},
		{"clicks", 2, nil},
		{"archive", 1, map[string]*string{"remote.storage.enable": ptr("true"),
			"internal.segment.bytes": ptr("2048"), "local.retention.bytes": ptr("1")}},
	} {
		if _, err := adm.CreateTopic(ctx, t.partitions, 1, t.configs, t.name); err != nil {
			return err
		}
	}
	return nil
}

// produceOrders writes k1:v1..k6:v6, one batch each, partitioned by key hash.
func produceOrders(ctx context.Context, cl *kgo.Client) error {
	for i := 1; i <= 6; i++ {
		r := &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// transactions writes to payments: a committed transaction (c1, c2), an
// aborted one (a1, a2), another committed one (c3), one left open (o1, by
// transactional id open-tx, timeout 60 s), and a plain record p1 after it.
func transactions(ctx context.Context, kafka string) error {
	txn := func(id string, values []string, end kgo.TransactionEndTry) error {
		cl := client(kafka, adminUser, adminPassword, false, kgo.TransactionalID(id), kgo.DefaultProduceTopic("payments"))
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				return err
			}
		}
		return cl.EndTransaction(ctx, end)
	}
	if err := txn("committer", []string{"c1", "c2"}, kgo.TryCommit); err != nil {
		return err
	}
	if err := txn("aborter", []string{"a1", "a2"}, kgo.TryAbort); err != nil {
		return err
	}
	if err := txn("committer", []string{"c3"}, kgo.TryCommit); err != nil {
		return err
	}
	open := client(kafka, adminUser, adminPassword, false, kgo.TransactionalID("open-tx"),
		kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic("payments"))
	if err := open.BeginTransaction(); err != nil {
		return err
	}
	if err := open.ProduceSync(ctx, kgo.StringRecord("o1")).FirstErr(); err != nil {
		return err
	}
	// Closing the client without EndTransaction leaves the transaction open.
	open.Close()
	plain := client(kafka, adminUser, adminPassword, false)
	defer plain.Close()
	return plain.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("p1")}).FirstErr()
}

// compacted writes three versions of u1..u4 and a tombstone for u2 to
// profiles, one batch each, and waits for the cleaner's first pass (its
// checkpoint file); then writes u5 into the dirty part.
func compacted(ctx context.Context, cl *kgo.Client, dataDir string) error {
	pad := make([]byte, 200)
	for v := 1; v <= 3; v++ {
		for k := 1; k <= 4; k++ {
			val := append(fmt.Appendf(nil, "u%d-v%d|", k, v), pad...)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "profiles", Key: fmt.Appendf(nil, "u%d", k), Value: val}).FirstErr(); err != nil {
				return err
			}
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "profiles", Key: []byte("u2")}).FirstErr(); err != nil {
		return err
	}
	for i := range 8 { // rolls past the tombstone so the cleaner may take it
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "profiles", Key: []byte("u9"), Value: append(fmt.Appendf(nil, "u9-v%d|", i), pad...)}).FirstErr(); err != nil {
			return err
		}
	}
	checkpoint := filepath.Join(dataDir, "logs", "profiles-0", "cleaner-offset.checkpoint")
	if err := until(ctx, "the cleaner's first pass", func() error {
		_, err := os.Stat(checkpoint)
		return err
	}); err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: "profiles", Key: []byte("u5"), Value: []byte("u5-v1")}).FirstErr()
}

// deletedTopic creates scratch, writes to it and deletes it.
func deletedTopic(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "scratch"); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "scratch", Value: []byte("gone")}).FirstErr(); err != nil {
		return err
	}
	_, err := adm.DeleteTopic(ctx, "scratch")
	return err
}

// groups consumes orders in a classic group (classic-g) and in a consumer-
// protocol group (modern-g) and commits each one's position.
func groups(ctx context.Context, kafka string) error {
	for _, g := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic-g", nil},
		{"modern-g", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}},
	} {
		opts := append([]kgo.Opt{kgo.ConsumerGroup(g.name), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, g.opts...)
		cl := client(kafka, adminUser, adminPassword, false, opts...)
		n := 0
		for n < 6 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				cl.Close()
				return err
			}
			n += fs.NumRecords()
		}
		err := cl.CommitUncommittedOffsets(ctx)
		cl.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// security creates the SCRAM user alice (SCRAM-SHA-512), lets her read orders
// and use group alice-g, denies her payments explicitly, and creates a
// delegation token for admin.
func security(ctx context.Context, adm *kadm.Client) error {
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: aliceUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: alicePassword}}); err != nil {
		return err
	}
	alice := "User:" + aliceUser
	allow := kadm.NewACLs().Allow(alice).Topics("orders").Groups("alice-g").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	deny := kadm.NewACLs().Deny(alice).Topics("payments").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, b := range []*kadm.ACLBuilder{allow, deny} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
	}
	_, err := adm.CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
	return err
}

// quotas sets producer_byte_rate of client id slow and consumer_byte_rate of
// user alice.
func quotas(ctx context.Context, adm *kadm.Client) error {
	return alterQuotas(ctx, adm,
		kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("slow")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
		kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr(aliceUser)}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
	)
}

// alterQuotas applies the quota changes and returns the first error.
func alterQuotas(ctx context.Context, adm *kadm.Client, entries ...kadm.AlterClientQuotaEntry) error {
	res, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// shareGroup writes t0..t5 to tasks in one batch; share group share-g
// (share.auto.offset.reset=earliest) gets all six, accepts t0..t2 and keeps
// t3..t5 acquired. The returned client must outlive the node.
func shareGroup(ctx context.Context, kafka string, admin *kgo.Client) (*kgo.Client, error) {
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Topic: "tasks", Value: fmt.Appendf(nil, "t%d", i)})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, err
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "share-g"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	r.Configs = append(r.Configs, rc)
	alter.Resources = append(alter.Resources, r)
	resp, err := alter.RequestWith(ctx, admin)
	if err != nil {
		return nil, err
	}
	if c := resp.Resources[0].ErrorCode; c != 0 {
		return nil, fmt.Errorf("setting share.auto.offset.reset: error %d", c)
	}
	cl := client(kafka, adminUser, adminPassword, false, kgo.ShareGroup("share-g"), kgo.ConsumeTopics("tasks"), kgo.ShareMaxRecords(10))
	var got []*kgo.Record
	if err := until(ctx, "the share group's first delivery", func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		fs := cl.PollFetches(pctx)
		got = fs.Records()
		if len(got) == 0 {
			return errors.New("nothing delivered")
		}
		return nil
	}); err != nil {
		cl.Close()
		return nil, err
	}
	if len(got) != 6 {
		cl.Close()
		return nil, fmt.Errorf("the first delivery has %d records, want all 6", len(got))
	}
	for _, rec := range got[:3] {
		rec.Ack(kgo.AckAccept)
	}
	if err := cl.FlushAcks(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

func client(kafka, user, password string, sha512 bool, opts ...kgo.Opt) *kgo.Client {
	auth := scram.Auth{User: user, Pass: password}
	mech := auth.AsSha256Mechanism()
	if sha512 {
		mech = auth.AsSha512Mechanism()
	}
	// Uncompressed, so that the padded records of profiles roll its segments.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kafka), kgo.SASL(mech),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return cl
}

// until calls fn every 100 ms until it returns nil or ctx ends.
func until(ctx context.Context, what string, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeTarGz packs the trees under root (its "data" and "remote" directories)
// into out.
func writeTarGz(root, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, dir := range []string{"data", "remote"} {
		if err := addTree(tw, root, dir); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Sync()
}

// addTree writes root/dir and everything under it to tw, named relative to root.
func addTree(tw *tar.Writer, root, dir string) error {
	return filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
}
