package chaos

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-stream/strata/internal/chaos/history"
	"github.com/strata-stream/strata/internal/share"
)

// The share-group workload (a run with runConfig.share): share consumers read
// the plain workload's topic through Strata's HTTP share API (POST /poll with
// "share": true, POST /ack per record), which is Strata's own share client
// (internal/httpapi/share.go) speaking ShareGroupHeartbeat, ShareFetch and
// ShareAcknowledge to the partition leaders as the Java KafkaShareConsumer
// does. Each answer to /ack says exactly whether that record's acknowledgement
// was applied, which a Kafka client does not tell per record. Consumers
// accept most records, reject some and release some, a few always (so they
// reach the delivery count limit and are dead-lettered).
const (
	shareDeliveryLimit = 3
	// shareRequestTimeout bounds one HTTP request; a node paused or cut off
	// answers nothing.
	shareRequestTimeout = 15 * time.Second
)

// shareConfig shapes a run's share consumers; zero fields take the
// campaign's values (withDefaults).
type shareConfig struct {
	consumers   int
	lock        time.Duration // share.record.lock.duration.ms
	pollRecords int           // max_records of a poll
}

func (c shareConfig) withDefaults() shareConfig {
	if c.consumers == 0 {
		c.consumers = 3
	}
	if c.lock == 0 {
		c.lock = 5 * time.Second
	}
	if c.pollRecords == 0 {
		c.pollRecords = 20
	}
	return c
}

// shareAction is what consumers do with a record, fixed by its value so that
// every delivery of it gets the same treatment: 3% rejected, 3% released at
// every delivery (dead-lettered at the limit), 6% released at the first
// delivery only, the rest accepted.
func shareAction(value string, count int16) string {
	h := fnv.New32a()
	h.Write([]byte(value))
	switch n := h.Sum32() % 100; {
	case n < 3:
		return "reject"
	case n < 6, n < 12 && count == 1:
		return "release"
	}
	return "accept"
}

// shareWorkload runs the share consumers and records what they are handed and
// what their acknowledgements were answered.
type shareWorkload struct {
	cfg   shareConfig
	addrs []string // every node's HTTP address
	topic string
	group string
	dlq   string
	hc    *http.Client
	logf  func(string, ...any)

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		deliveries []history.ShareDelivery
		acks       []history.ShareAck
	}
}

// shareGroup and deadLetterTopic name a run's share group and its dead-letter
// topic (which must start with the broker's prefix, dlq.).
func shareGroup(topic string) string      { return topic + "-share" }
func deadLetterTopic(topic string) string { return "dlq." + topic }

// startShareWorkload creates the dead-letter topic, sets the group's configs
// and starts the consumers.
func startShareWorkload(cfg shareConfig, adm *kadm.Client, addrs []string, topic string, logf func(string, ...any)) (*shareWorkload, error) {
	w := &shareWorkload{cfg: cfg.withDefaults(), addrs: addrs, topic: topic, group: shareGroup(topic), dlq: deadLetterTopic(topic),
		hc: &http.Client{Timeout: shareRequestTimeout}, logf: logf}
	if err := createTopic(adm, w.dlq, 1, 3, map[string]string{"errors.deadletterqueue.group.enable": "true"}); err != nil {
		return nil, fmt.Errorf("creating %s: %w", w.dlq, err)
	}
	configs := map[string]any{"configs": map[string]string{
		"share.auto.offset.reset":                   "earliest",
		"share.delivery.count.limit":                strconv.Itoa(shareDeliveryLimit),
		"share.record.lock.duration.ms":             strconv.Itoa(int(w.cfg.lock / time.Millisecond)),
		"errors.deadletterqueue.topic.name":         w.dlq,
		"errors.deadletterqueue.copy.record.enable": "true",
	}}
	if err := waitFor(healthyTimeout, func() error {
		status, body, err := w.post(context.Background(), addrs[0], "/groups/"+w.group+"/configs", configs)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d: %s", status, body)
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("setting the configs of share group %s: %w", w.group, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for i := range w.cfg.consumers {
		w.wg.Go(func() { w.consume(ctx, i) })
	}
	return w, nil
}

// post sends body as JSON to addr's path and returns the status and body.
func (w *shareWorkload) post(ctx context.Context, addr, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

type sharePollAnswer struct {
	Records []struct {
		Partition     int32  `json:"partition"`
		Offset        int64  `json:"offset"`
		ValueB64      string `json:"value_b64"`
		DeliveryCount int16  `json:"delivery_count"`
	} `json:"records"`
}

// consume is consumer i. It polls one node as one member until that node fails
// it (no answer, a 5xx other than 503 to a poll), then closes the member
// (DELETE, if the node answers) and goes on at the next node as a new member:
// a member lives on the node it polls, and a killed node takes it along. A
// member left open would stay in the group, holding its partitions unpolled,
// until its instance expired (45 s idle).
func (w *shareWorkload) consume(ctx context.Context, i int) {
	node, gen := i%len(w.addrs), 0
	for ctx.Err() == nil {
		name := fmt.Sprintf("share-%d-%d", i, gen)
		if !w.pollOnce(ctx, w.addrs[node], name) && ctx.Err() == nil {
			w.closeMember(ctx, w.addrs[node], name)
			node, gen = (node+1)%len(w.addrs), gen+1
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
}

// closeMember closes member name at addr, giving back what it holds and
// leaving the group; a node that does not answer within a second keeps it
// until it expires.
func (w *shareWorkload) closeMember(ctx context.Context, addr, name string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "DELETE", "http://"+addr+"/groups/"+w.group+"/consumers/"+name, nil)
	if err != nil {
		return
	}
	if resp, err := w.hc.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// pollOnce polls once as member name of node addr and acknowledges what it was
// handed; false: the node failed the member (no answer, or an error other
// than 503, which a node starting or stopping answers).
func (w *shareWorkload) pollOnce(ctx context.Context, addr, name string) bool {
	start := time.Now()
	status, body, err := w.post(ctx, addr, "/poll", map[string]any{"group": w.group, "topic": w.topic, "consumer": name,
		"share": true, "max_records": w.cfg.pollRecords, "timeout_ms": 500})
	end := time.Now()
	if err == nil && status == http.StatusServiceUnavailable {
		sleepCtx(ctx, 200*time.Millisecond)
		return true
	}
	if err != nil || status != http.StatusOK {
		if ctx.Err() == nil {
			w.logf("share consumer %s at %s: poll: status %d, %v %s", name, addr, status, err, body)
		}
		return false
	}
	var ans sharePollAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		w.logf("share consumer %s at %s: poll answer %q: %v", name, addr, body, err)
		return false
	}
	ok := true
	for _, r := range ans.Records {
		v, err := base64.StdEncoding.DecodeString(r.ValueB64)
		if err != nil {
			w.logf("share consumer %s: value_b64 %q: %v", name, r.ValueB64, err)
			continue
		}
		d := history.ShareDelivery{Consumer: name, Partition: r.Partition, Offset: r.Offset, Value: string(v), Count: r.DeliveryCount, Start: start, End: end}
		a := history.ShareAck{Consumer: name, Partition: r.Partition, Offset: r.Offset, Type: shareAction(d.Value, d.Count), Count: d.Count}
		w.mu.Lock()
		w.mu.deliveries = append(w.mu.deliveries, d)
		w.mu.Unlock()
		if !ok { // the node failed this member: the rest of its records come back when their locks expire
			continue
		}
		a.Start = time.Now()
		status, body, err := w.post(ctx, addr, "/ack", map[string]any{"group": w.group, "topic": w.topic, "consumer": name,
			"partition": r.Partition, "offset": r.Offset, "result": a.Type})
		a.End = time.Now()
		switch {
		case err == nil && status == http.StatusOK:
			a.Outcome = history.OK
		case err == nil && status == http.StatusConflict:
			a.Outcome = history.Failed // INVALID_RECORD_STATE: the member did not hold it
		default:
			// An answered error (a state save that timed out: 504) leaves the
			// member as it was; no answer means the node failed it.
			a.Outcome = history.Unknown
			ok = err == nil
			if ctx.Err() == nil {
				w.logf("share consumer %s at %s: %s %d@%d: status %d, %v %s", name, addr, a.Type, r.Partition, r.Offset, status, err, body)
			}
		}
		w.mu.Lock()
		w.mu.acks = append(w.mu.acks, a)
		w.mu.Unlock()
	}
	return ok
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *shareWorkload) snapshot() ([]history.ShareDelivery, []history.ShareAck) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]history.ShareDelivery(nil), w.mu.deliveries...), append([]history.ShareAck(nil), w.mu.acks...)
}

// drain lets the consumers run until every acknowledged send is settled (see
// unsettled) or timeout passes, then stops them. What settles a record that
// failed for good is its dead letter, read from seeds at most once a second
// while records are unsettled: a record whose last delivery reached no
// consumer (its acquisition was saved, the answer lost with its node) is
// dead-lettered at the limit with nothing a consumer saw.
func (w *shareWorkload) drain(seeds brokers, sends []history.Send, timeout time.Duration) error {
	var (
		dls  []history.DeadLetter
		read time.Time
	)
	err := waitFor(timeout, func() error {
		ds, as := w.snapshot()
		n := w.unsettled(sends, ds, as, dls)
		if n > 0 && time.Since(read) >= time.Second {
			read = time.Now()
			var err error
			if dls, err = readDeadLetters(seeds, w.dlq, deadLetterReadTimeout); err != nil {
				return fmt.Errorf("%d acknowledged records not settled by the share group; reading the dead-letter topic: %w", n, err)
			}
			n = w.unsettled(sends, ds, as, dls)
		}
		if n > 0 {
			return fmt.Errorf("%d acknowledged records not settled by the share group", n)
		}
		return nil
	})
	w.close()
	return err
}

// unsettled counts the acknowledged sends not yet settled (history's
// ShareHistory.Unsettled), waiting two lock durations after an unanswered
// ACCEPT for the record to be handed out again had it not been applied.
func (w *shareWorkload) unsettled(sends []history.Send, ds []history.ShareDelivery, as []history.ShareAck, dls []history.DeadLetter) int {
	h := history.ShareHistory{Sends: sends, Deliveries: ds, Acks: as, DeadLetters: dls}
	return h.Unsettled(time.Now(), 2*w.cfg.lock)
}

// deadLetterReadTimeout bounds one read of the dead-letter topic during the
// drain.
const deadLetterReadTimeout = 10 * time.Second

func (w *shareWorkload) close() {
	w.cancel()
	w.wg.Wait()
}

// shareRoleNode is the node a fault of role ShareCoordinator or ShareState
// hits in a share run on topic, and why.
func shareRoleNode(adm *kadm.Client, topic string, f Fault) (int32, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	group := shareGroup(topic)
	if f.Role == ShareCoordinator {
		r, ok := adm.FindGroupCoordinators(ctx, group)[group]
		switch {
		case !ok:
			return 0, "", fmt.Errorf("no coordinator for %s", group)
		case r.Err != nil:
			return 0, "", fmt.Errorf("the coordinator of %s: %w", group, r.Err)
		}
		return r.NodeID, "share group coordinator", nil
	}
	md, err := adm.Metadata(ctx, topic, share.StateTopic)
	if err != nil {
		return 0, "", err
	}
	t, ok := md.Topics[topic]
	if !ok || t.Err != nil {
		return 0, "", fmt.Errorf("topic %s: %v", topic, t.Err)
	}
	state := md.Topics[share.StateTopic]
	if len(state.Partitions) == 0 {
		return 0, "", fmt.Errorf("no %s yet: %v", share.StateTopic, state.Err)
	}
	sp := share.StatePartition(share.Key{Group: group, TopicID: t.ID, Partition: f.Partition}, int32(len(state.Partitions)))
	pd, ok := state.Partitions[sp]
	if !ok || pd.Leader < 1 {
		return 0, "", fmt.Errorf("%s-%d has no leader", share.StateTopic, sp)
	}
	return pd.Leader, fmt.Sprintf("share coordinator of partition %d: leader of %s-%d", f.Partition, share.StateTopic, sp), nil
}

// readDeadLetters reads the dead-letter topic whole and returns its records as
// their headers describe them.
func readDeadLetters(seeds brokers, topic string, timeout time.Duration) ([]history.DeadLetter, error) {
	adm, err := kgo.NewClient(clientOpts(seeds, "chaos-dlq-admin")...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	end, err := endOffsets(kadm.NewClient(adm), topic, 1)
	if err != nil {
		return nil, err
	}
	final, err := finalReadWith(seeds, topic, end, timeout)
	if err != nil {
		return nil, err
	}
	var out []history.DeadLetter
	for _, r := range final[0] {
		dl, err := deadLetterOf(r)
		if err != nil {
			return nil, fmt.Errorf("%s@%d: %w", topic, r.Offset, err)
		}
		out = append(out, dl)
	}
	return out, nil
}

// deadLetterOf reads a dead letter's KIP-1191 headers.
func deadLetterOf(r *kgo.Record) (history.DeadLetter, error) {
	h := map[string]string{}
	for _, hd := range r.Headers {
		h[hd.Key] = string(hd.Value)
	}
	dl := history.DeadLetter{Topic: h["__dlq.errors.topic"], Group: h["__dlq.errors.group"], Value: string(r.Value)}
	p, err1 := strconv.ParseInt(h["__dlq.errors.partition"], 10, 32)
	o, err2 := strconv.ParseInt(h["__dlq.errors.offset"], 10, 64)
	c, err3 := strconv.ParseInt(h["__dlq.errors.delivery.count"], 10, 16)
	if err := errors.Join(err1, err2, err3); err != nil {
		return dl, fmt.Errorf("headers %v: %w", h, err)
	}
	dl.Partition, dl.Offset, dl.DeliveryCount = int32(p), o, int16(c)
	return dl, nil
}
