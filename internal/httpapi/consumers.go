package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultConsumer names the member a poll without "consumer" acts as.
const defaultConsumer = "default"

// instanceKey names a consumer instance.
type instanceKey struct{ group, consumer string }

// instance is one HTTP consumer: an embedded franz-go group consumer of one topic,
// auto-commit off, whose fetch position moves with every poll the client gets.
type instance struct {
	key   instanceKey
	topic string
	cl    *kgo.Client
	// share is set for a share-group member (share.go); cl then belongs to no
	// consumer group.
	share   *shareMember
	idleFor time.Duration
	// assigned closes when the group first assigns the member partitions;
	// partitions then holds the first assignment's partitions of topic.
	assigned   chan struct{}
	partitions []int32
	// groupFailed closes at the member's first group management error (the
	// coordinator refused its join, say); groupErr then holds that error.
	groupFailed chan struct{}
	groupErr    error
	// opts are the options the instance was created with.
	opts instanceOptions
	// pollMu serialises polls, each holding it until its answer is written or its
	// records are given back (poll), so each poll starts where the previous one's
	// delivered records ended; a commit of the positions takes it too.
	pollMu sync.Mutex
	// awaitedAssignment is set once a poll has waited for the first assignment;
	// guarded by pollMu.
	awaitedAssignment bool

	// Guarded by consumers.mu.
	inFlight int
	lastUsed time.Time
	idle     *time.Timer
	gone     bool // removed from the registry; the client is closed or closing
}

// consumers is the registry of consumer instances. An instance lives while it is
// used: every request holds it (acquire/release) and an idle timer closes it once
// nothing has used it for its session timeout; closing the client leaves the
// group. mu guards the map and every instance's bookkeeping, never I/O: clients are
// created (no I/O until used) under it and closed outside it.
type consumers struct {
	cfg Config
	mu  struct {
		sync.Mutex
		byKey  map[instanceKey]*instance
		closed bool
	}
	closing sync.WaitGroup // idle instances being closed
}

func (c *consumers) init(cfg Config) {
	c.cfg = cfg
	c.mu.byKey = map[instanceKey]*instance{}
}

// instanceOptions are what a poll may say about the instance it creates.
type instanceOptions struct {
	topic          string
	resetLatest    bool
	sessionTimeout time.Duration // 0: Config.DefaultSessionTimeout
	// readUncommitted: fetch up to the high-water mark, open and aborted
	// transactions included (the default reads committed data only).
	readUncommitted bool
	// share makes the instance a share-group member (share.go).
	share bool
}

// acquire returns the instance for key, created with opts when there is none yet,
// held until release. An existing instance must consume opts.topic.
func (c *consumers) acquire(key instanceKey, opts instanceOptions) (*instance, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, errorf(http.StatusServiceUnavailable, codeShuttingDown, "the node is shutting down")
	}
	inst := c.mu.byKey[key]
	if inst == nil {
		if len(c.mu.byKey) >= c.cfg.MaxConsumers {
			return nil, errorf(http.StatusTooManyRequests, codeTooManyConsumers, "%d consumer instances exist on this node; close some (DELETE /groups/{group}/consumers/{consumer}) or let them expire", len(c.mu.byKey))
		}
		var err error
		if inst, err = c.newInstanceLocked(key, opts); err != nil {
			return nil, fromErr(err)
		}
	} else if opts.topic != "" && inst.topic != opts.topic {
		return nil, consumerTopicConflict(key, inst.topic, opts.topic)
	}
	inst.inFlight++
	return inst, nil
}

func consumerTopicConflict(key instanceKey, has, asked string) *apiError {
	return errorf(http.StatusConflict, codeConsumerTopic,
		"consumer %q of group %q consumes topic %q; use another consumer name for topic %q", key.consumer, key.group, has, asked)
}

// lookup is acquire without creating: nil when there is no such instance.
func (c *consumers) lookup(key instanceKey) *instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst := c.mu.byKey[key]
	if inst != nil {
		inst.inFlight++
	}
	return inst
}

// ofGroup holds every instance of group (for seeks); release each.
func (c *consumers) ofGroup(group string) []*instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*instance
	for k, inst := range c.mu.byKey {
		if k.group == group {
			inst.inFlight++
			out = append(out, inst)
		}
	}
	slices.SortFunc(out, func(a, b *instance) int { return strings.Compare(a.key.consumer, b.key.consumer) })
	return out
}

// release ends one use of inst; the idle timer starts over.
func (c *consumers) release(inst *instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst.inFlight--
	inst.lastUsed = time.Now()
	if inst.inFlight == 0 && !inst.gone {
		inst.idle.Reset(inst.idleFor)
	}
}

func (c *consumers) newInstanceLocked(key instanceKey, opts instanceOptions) (*instance, error) {
	session := opts.sessionTimeout
	if session <= 0 {
		session = c.cfg.DefaultSessionTimeout
	}
	if opts.share {
		return c.newShareInstanceLocked(key, opts, session)
	}
	reset := kgo.NewOffset().AtStart()
	if opts.resetLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	inst := &instance{key: key, topic: opts.topic, opts: opts, idleFor: session, lastUsed: time.Now(),
		assigned: make(chan struct{}), groupFailed: make(chan struct{})}
	var assignedOnce, failedOnce sync.Once
	markAssigned := func(parts []int32) {
		assignedOnce.Do(func() {
			inst.partitions = parts
			close(inst.assigned) // publishes partitions to whoever saw assigned closed
		})
	}
	markFailed := groupErrorHook(func(err error) {
		failedOnce.Do(func() {
			inst.groupErr = &kgo.ErrGroupSession{Err: err} // as the client's poll reports it
			close(inst.groupFailed)                        // publishes groupErr likewise
		})
	})
	iso := kgo.ReadCommitted()
	if opts.readUncommitted {
		iso = kgo.ReadUncommitted()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.cfg.KafkaAddr),
		kgo.ClientID(memberClientID(key, c.cfg.AdvertisedAddr)),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, added map[string][]int32) { markAssigned(added[opts.topic]) }),
		kgo.WithHooks(markFailed),
		kgo.ConsumerGroup(key.group),
		kgo.ConsumeTopics(opts.topic),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(reset),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(min(session/10, 3*time.Second)),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.FetchMaxWait(time.Second),
		kgo.FetchIsolationLevel(iso),
	}, c.cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	inst.cl = cl
	return c.addLocked(inst, session), nil
}

// groupErrorHook is a kgo hook called with every error that ends the member's
// group session.
type groupErrorHook func(error)

func (f groupErrorHook) OnGroupManageError(err error) { f(err) }

// addLocked registers a new instance, idle for session at most.
func (c *consumers) addLocked(inst *instance, session time.Duration) *instance {
	inst.idle = time.AfterFunc(session, func() { c.expire(inst) })
	c.mu.byKey[inst.key] = inst
	c.cfg.Logger.Info("consumer instance created", "group", inst.key.group, "consumer", inst.key.consumer, "topic", inst.topic,
		"share", inst.share != nil, "session_timeout", session)
	return inst
}

// expire closes inst if nothing has used it for its session timeout.
func (c *consumers) expire(inst *instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inst.gone || c.mu.closed || inst.inFlight > 0 {
		return // release re-arms the timer
	}
	if left := inst.idleFor - time.Since(inst.lastUsed); left > 0 {
		inst.idle.Reset(left)
		return
	}
	c.removeLocked(inst)
	c.cfg.Logger.Info("consumer instance idle: leaving the group", "group", inst.key.group, "consumer", inst.key.consumer)
	c.closing.Add(1)
	go func() {
		defer c.closing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inst.close(ctx)
	}()
}

func (c *consumers) removeLocked(inst *instance) {
	inst.gone = true
	inst.idle.Stop()
	delete(c.mu.byKey, inst.key)
}

// remove closes the instance key now (its member leaves the group before remove
// returns, or ctx is done); false when there is none.
func (c *consumers) remove(ctx context.Context, key instanceKey) bool {
	c.mu.Lock()
	inst := c.mu.byKey[key]
	if inst != nil {
		c.removeLocked(inst)
	}
	c.mu.Unlock()
	if inst == nil {
		return false
	}
	inst.close(ctx)
	return true
}

// close leaves the group, waiting until ctx is done at most, and closes the client.
func (inst *instance) close(ctx context.Context) {
	if inst.share != nil {
		inst.share.close(ctx)
	} else {
		inst.cl.LeaveGroupContext(ctx)
	}
	inst.cl.Close()
}

// close closes every instance, each leaving its group (waiting until ctx is done
// at most).
func (c *consumers) close(ctx context.Context) {
	c.mu.Lock()
	c.mu.closed = true
	var all []*instance
	for _, inst := range c.mu.byKey {
		c.removeLocked(inst)
		all = append(all, inst)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range all {
		wg.Go(func() { inst.close(ctx) })
	}
	wg.Wait()
	c.closing.Wait()
}
