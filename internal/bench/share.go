package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// How the members of a Share run read and acknowledge (Config.ShareAck).
const (
	// ShareAccept: share-group members accept every record. franz-go accepts a
	// poll's records at the next poll and sends the acknowledgements on the
	// next ShareFetch, as the Java KafkaShareConsumer does in its implicit mode.
	ShareAccept = "accept"
	// ShareAckEach: after every poll a member accepts its records and waits for
	// the broker to confirm them (franz-go's FlushAcks, Java's commitSync). The
	// wait is the run's latency. The member fetches only while it polls
	// (record-limit mode), so no ShareFetch holds the acknowledgement back.
	ShareAckEach = "ack-each"
	// ShareReject: members reject every record. With Config.DeadLetterTopic the
	// run ends when the group has written every record there (KIP-1191).
	ShareReject = "reject"
	// ShareClassic: a classic consumer group (JoinGroup/SyncGroup) reads the
	// same records, for comparison.
	ShareClassic = "classic"
)

// Share runs Config.Consumers members of the share group Config.Group (or, with
// ShareClassic, of a classic group) over the topic until every record in it has
// been read; with Config.Count the topic is first filled to that many records,
// untimed. The group must be new: it reads from the topic's start (the group
// config share.auto.offset.reset=earliest is set before the members join).
//
// Timing. Members join at different times (a share group assigns through its
// heartbeats), so the clock of ShareAccept and ShareAckEach starts once every
// member holds its assignment (ShareGroupDescribe, polled every 20 ms) and counts
// only the records read after that: the rate of all members sharing the
// partition. ShareClassic starts when the first member has its assignment, and
// ShareReject at the first records delivered. A ShareReject run with a dead-letter topic ends when
// the topic holds one record per record read (polled every 20 ms); the others end
// at the last record delivered. A record delivered twice (a lock that expired,
// records released by a member leaving) is counted once.
func Share(ctx context.Context, c Config) (Result, error) {
	if err := c.Validate("share"); err != nil {
		return Result{}, err
	}
	res := c.result("share")
	res.Group, res.ShareAck = c.Group, c.ShareAck
	partitions, start, end, prefilled, err := prefill(ctx, &c)
	res.Partitions, res.Prefilled = int32(len(partitions)), prefilled
	if err != nil {
		return res, err
	}
	target := available(start, end)
	if target == 0 {
		return res, fmt.Errorf("topic %q: %w (give --count to have them produced)", c.Topic, ErrNoRecords)
	}
	var dlqBase int64
	if c.ShareAck != ShareClassic {
		if c.DeadLetterTopic != "" {
			if dlqBase, err = c.prepareDeadLetterTopic(ctx); err != nil {
				return res, err
			}
		}
		if err := c.setShareGroupConfigs(ctx); err != nil {
			return res, err
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, c.Duration)
		defer cancel()
	}
	allAssigned := c.ShareAck == ShareAccept || c.ShareAck == ShareAckEach
	tr := newShareTracker(partitions, start, end, c.Consumers, allAssigned)
	if allAssigned {
		go c.watchAssignments(runCtx, tr)
	}
	lat := newRecorder()
	began := time.Now()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for i := range c.Consumers {
		wg.Go(func() {
			if err := c.shareMember(runCtx, i, tr, lat); err != nil {
				errOnce.Do(func() { firstErr = err })
				cancel()
			}
		})
	}
	finished := tr.done
	if c.DeadLetterTopic != "" {
		finished = make(chan struct{})
		go func() {
			defer close(finished)
			c.waitDeadLettered(runCtx, dlqBase, target, tr)
		}()
	}
	select {
	case <-finished:
	case <-runCtx.Done():
	}
	cancel()
	wg.Wait()

	w := tr.window()
	if c.DeadLetterTopic != "" {
		w.end, w.base = tr.deadLettered.Load(), 0
		res.DeadLettered = tr.deadLetteredCount.Load()
	}
	res.Records = target - w.base
	res.Bytes = res.Records * tr.meanSize()
	res.RecordSize = int(tr.meanSize())
	res.Redelivered = tr.redelivered.Load()
	if !w.started.IsZero() {
		res.JoinSeconds = w.started.Sub(began).Seconds()
	}
	if ended := timeOf(w.end); !w.started.IsZero() && ended.After(w.started) {
		res.finish(ended.Sub(w.started))
	}
	switch c.ShareAck {
	case ShareAckEach:
		res.Latency = lat.summary("acknowledgement: accept a poll's records and wait for the broker (FlushAcks)")
	default:
		res.Latency = lat.summary("poll that returned records")
	}
	if firstErr != nil {
		return res, firstErr
	}
	if err := tr.incomplete(target, c.DeadLetterTopic != "", c.Duration); err != nil {
		return res, err
	}
	switch {
	case w.started.IsZero():
		return res, fmt.Errorf("%w: the measured window never opened (not all %d members held an assignment, or none read)", ErrRecordsFailed, c.Consumers)
	case w.base >= target:
		return res, fmt.Errorf("%w: the group had read all %d records when the window opened; give more records", ErrRecordsFailed, target)
	}
	return res, nil
}

// shareTracker counts the distinct records a run's members received and times
// its window. It is shared by the members' goroutines.
type shareTracker struct {
	members   int
	explicit  bool            // the window opens only when open is called
	base      map[int32]int64 // the partitions' start offsets
	end       map[int32]int64 // and their end offsets when the run began
	offsets   map[int32]int   // index in seen of each partition's first record
	done      chan struct{}
	doneOnce  sync.Once
	opened    chan struct{} // closed when the window opens
	openOnce  sync.Once
	mu        sync.Mutex
	seen      []bool // per record: index offsets[p] + offset - base[p]
	distinct  int64
	bytes     int64
	joined    []bool
	nJoined   int
	start     time.Time
	startBase int64 // distinct records when the window started
	lastAt    atomic.Int64
	total     int64

	redelivered       atomic.Int64
	deadLettered      atomic.Int64 // unix nanos the dead-letter topic was complete
	deadLetteredCount atomic.Int64
}

// window is the measured interval: from started (zero: never started) to end
// (unix nanos) and the records already read when it started.
type window struct {
	started time.Time
	end     int64
	base    int64
}

func newShareTracker(partitions []int32, start, end map[int32]int64, members int, explicit bool) *shareTracker {
	t := &shareTracker{members: members, explicit: explicit, base: start, end: end, offsets: map[int32]int{},
		done: make(chan struct{}), opened: make(chan struct{}), joined: make([]bool, members)}
	n := 0
	for _, p := range partitions {
		t.offsets[p] = n
		n += int(max(end[p]-start[p], 0))
	}
	t.seen, t.total = make([]bool, n), int64(n)
	return t
}

// add records what member received in one poll (records of other topics,
// transaction markers and records past the end listed at the start aside).
func (t *shareTracker) add(member int, rs []*kgo.Record) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		i, ok := t.offsets[r.Partition]
		if !ok || r.Attrs.IsControl() || r.Offset < t.base[r.Partition] || r.Offset >= t.end[r.Partition] {
			continue
		}
		i += int(r.Offset - t.base[r.Partition])
		if t.seen[i] {
			t.redelivered.Add(1)
			continue
		}
		t.seen[i] = true
		t.distinct++
		t.bytes += int64(len(r.Value))
	}
	if len(rs) > 0 {
		t.readyLocked(member, now)
	}
	if t.distinct == t.total && t.lastAt.Load() == 0 {
		t.lastAt.Store(now.UnixNano())
		t.doneOnce.Do(func() { close(t.done) })
	}
}

// ready notes that member is reading: a classic member once it has its
// assignment, before its first fetch.
func (t *shareTracker) ready(member int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readyLocked(member, time.Now())
}

func (t *shareTracker) readyLocked(member int, now time.Time) {
	if t.joined[member] {
		return
	}
	t.joined[member] = true
	t.nJoined++
	if t.start.IsZero() && !t.explicit {
		t.openLocked(now)
	}
}

func (t *shareTracker) openLocked(now time.Time) {
	t.start, t.startBase = now, t.distinct
	t.openOnce.Do(func() { close(t.opened) })
}

// open opens the window now, unless it is open.
func (t *shareTracker) open() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start.IsZero() {
		t.openLocked(time.Now())
	}
}

func (t *shareTracker) window() window {
	t.mu.Lock()
	defer t.mu.Unlock()
	return window{started: t.start, end: t.lastAt.Load(), base: t.startBase}
}

func (t *shareTracker) read() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct
}

func (t *shareTracker) meanSize() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.distinct == 0 {
		return 0
	}
	return t.bytes / t.distinct
}

// incomplete says what a run that stopped early lacked.
func (t *shareTracker) incomplete(target int64, deadLetters bool, bound time.Duration) error {
	if n := t.read(); n < target {
		return fmt.Errorf("%w: the group read %d of %d records within %s", ErrRecordsFailed, n, target, bound)
	}
	if deadLetters && t.deadLettered.Load() == 0 {
		return fmt.Errorf("%w: %d of %d records reached the dead-letter topic within %s", ErrRecordsFailed, t.deadLetteredCount.Load(), target, bound)
	}
	return nil
}

func timeOf(unixNanos int64) time.Time {
	if unixNanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, unixNanos)
}

// shareMember is member i: it polls until ctx ends, then acknowledges what it
// holds and leaves the group.
func (c *Config) shareMember(ctx context.Context, i int, tr *shareTracker, lat *recorder) error {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ConsumeTopics(c.Topic), kgo.ClientID(fmt.Sprintf("strata-bench-share-%d", i))}
	status := kgo.AckAccept
	switch c.ShareAck {
	case ShareClassic:
		opts = append(opts, kgo.ConsumerGroup(c.Group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { tr.ready(i) }))
	case ShareAckEach:
		opts = append(opts, kgo.ShareGroup(c.Group), kgo.ShareMaxRecordsStrict())
	case ShareReject:
		opts = append(opts, kgo.ShareGroup(c.Group))
		status = kgo.AckReject
	default:
		opts = append(opts, kgo.ShareGroup(c.Group))
	}
	cl, err := kgo.NewClient(append(opts, c.ClientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	finish := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.drainTimeout())
		defer cancel()
		if c.ShareAck == ShareClassic {
			return cl.CommitUncommittedOffsets(ctx)
		}
		cl.MarkAcks(status)
		return cl.FlushAcks(ctx)
	}
	if tr.explicit {
		// Members read only once every one holds an assignment (the client's
		// heartbeats run without polls): else the first member can read the
		// whole topic before a later one is assigned its share of it.
		select {
		case <-tr.opened:
		case <-ctx.Done():
		}
	}
	for {
		began := time.Now()
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			if err := finish(); err != nil {
				return fmt.Errorf("member %d acknowledging at the end: %w", i, err)
			}
			return nil
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) && !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fmt.Errorf("member %d fetching %s partition %d: %w", i, fe.Topic, fe.Partition, fe.Err)
			}
		}
		rs := fs.Records()
		if len(rs) == 0 {
			continue
		}
		if c.ShareAck != ShareAckEach {
			lat.record(time.Since(began))
		}
		tr.add(i, rs)
		c.progress(int64(len(rs)))
		switch c.ShareAck {
		case ShareReject:
			cl.MarkAcks(kgo.AckReject)
		case ShareAckEach:
			cl.MarkAcks(kgo.AckAccept)
			sent := time.Now()
			if err := cl.FlushAcks(ctx); err != nil {
				if ctx.Err() != nil {
					continue // the run is over; the loop's top finishes
				}
				return fmt.Errorf("member %d acknowledging: %w", i, err)
			}
			lat.record(time.Since(sent))
		}
	}
}

// watchAssignments polls ShareGroupDescribe until the group has Config.Consumers
// members and each holds an assignment, then opens the tracker's window.
func (c *Config) watchAssignments(ctx context.Context, tr *shareTracker) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return // the run then fails: its window never opened
	}
	defer cl.Close()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{c.Group}
	for {
		if resp, err := req.RequestWith(ctx, cl); err == nil && allAssigned(resp, c.Group, c.Consumers) {
			tr.open()
			return
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return
		}
	}
}

// allAssigned says whether the described group has members members, each
// holding at least one partition.
func allAssigned(resp *kmsg.ShareGroupDescribeResponse, group string, members int) bool {
	for _, g := range resp.Groups {
		if g.GroupID != group || g.ErrorCode != 0 || len(g.Members) != members {
			continue
		}
		for _, m := range g.Members {
			held := 0
			for _, tp := range m.Assignment.TopicPartitions {
				held += len(tp.Partitions)
			}
			if held == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// setShareGroupConfigs makes the group read from the topic's start and, with a
// dead-letter topic, write rejected records there (IncrementalAlterConfigs on
// the GROUP resource, as kafka-configs --entity-type groups does).
func (c *Config) setShareGroupConfigs(ctx context.Context) error {
	set := map[string]string{"share.auto.offset.reset": "earliest"}
	if c.DeadLetterTopic != "" {
		set["errors.deadletterqueue.topic.name"] = c.DeadLetterTopic
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, c.Group
	for k, v := range set {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value, cfg.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("setting the configs of group %q: %w", c.Group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("setting the configs of group %q: %w%s", c.Group, err, msg)
		}
	}
	return c.waitGroupConfigs(ctx, cl, set)
}

// waitGroupConfigs polls DescribeConfigs of the group on every broker until
// each reports the values set. Brokers learn group configs from the metadata log
// a moment after the change is acknowledged, and a share partition loaded
// before its leader knows share.auto.offset.reset=earliest starts at the end:
// the group would then read nothing.
func (c *Config) waitGroupConfigs(ctx context.Context, cl *kgo.Client, set map[string]string) error {
	deadline := time.Now().Add(c.drainTimeout())
	for {
		err := c.groupConfigsEverywhere(ctx, cl, set)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the configs of group %q did not reach every broker within %s: %w", c.Group, c.drainTimeout(), err)
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return ctx.Err()
		}
	}
}

func (c *Config) groupConfigsEverywhere(ctx context.Context, cl *kgo.Client, set map[string]string) error {
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, b := range md.Brokers {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, c.Group
		for k := range set {
			res.ConfigNames = append(res.ConfigNames, k)
		}
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
		have := map[string]string{}
		for _, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("broker %d: %w", b.NodeID, err)
			}
			for _, cfg := range r.Configs {
				if cfg.Value != nil {
					have[cfg.Name] = *cfg.Value
				}
			}
		}
		for k, v := range set {
			if have[k] != v {
				return fmt.Errorf("broker %d has %s=%q", b.NodeID, k, have[k])
			}
		}
	}
	return nil
}

// prepareDeadLetterTopic creates the dead-letter topic (one partition, the
// run's replication factor, errors.deadletterqueue.group.enable=true) unless it
// exists, and returns its end offset.
func (c *Config) prepareDeadLetterTopic(ctx context.Context) (int64, error) {
	dlq := *c
	dlq.Topic, dlq.Partitions = c.DeadLetterTopic, 1
	dlq.TopicConfigs = map[string]string{"errors.deadletterqueue.group.enable": "true"}
	partitions, err := ensureTopic(ctx, &dlq)
	if err != nil {
		return 0, fmt.Errorf("dead-letter topic: %w", err)
	}
	_, end, err := listOffsets(ctx, &dlq, partitions)
	if err != nil {
		return 0, fmt.Errorf("dead-letter topic: %w", err)
	}
	return available(map[int32]int64{}, end), nil
}

// waitDeadLettered polls the dead-letter topic's end offset until want records
// have been added above base or ctx ends, and notes when that happened.
func (c *Config) waitDeadLettered(ctx context.Context, base, want int64, tr *shareTracker) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, c.DeadLetterTopic)
		if err == nil {
			var n int64
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					n += o.Offset
				}
			})
			tr.deadLetteredCount.Store(n - base)
			if n-base >= want {
				tr.deadLettered.Store(time.Now().UnixNano())
				return
			}
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return
		}
	}
}
