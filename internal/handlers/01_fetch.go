package handlers

// Fetch (key 1), v4-v18, for consumers and for followers (replica id >= 0: in the
// request header field before v15, in ReplicaState from v15).
//   v4: isolation level, last stable offset; v5: log start offset; v7: incremental
//   fetch sessions (KIP-227, fetch_sessions.go);
//   v9: current leader epoch (fencing); v11: rack id and preferred read replica
//   (KIP-392, replica_selector.go); v12+: flexible, v13+: topic ids instead of names
//   (KIP-516: an id the image lacks is UNKNOWN_TOPIC_ID; one whose hosted log is a
//   deleted topic's of the same name, not yet replaced, INCONSISTENT_TOPIC_ID; a
//   session's partition keeps the name its id had when it joined, or the name first
//   found for it after, so once the topic is recreated it is INCONSISTENT_TOPIC_ID,
//   once deleted UNKNOWN_TOPIC_OR_PARTITION);
//   v16 (KIP-951): NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH name the
//   current leader and its endpoint (leader_hint.go).
//   v17 and v18 add only tagged request fields a Kafka follower sends (its log
//   directory id, KIP-853; its high-water mark, KIP-1166); they are ignored, and the
//   response is v16's. Kafka's kafka-replica-verification sends v18 without asking
//   ApiVersions first.
// Consumers get only data below the high-water mark; followers read up to the log
// end, report their progress with their fetch offset, and are told where their log
// diverges (DivergingEpoch, v12+, from LastFetchedEpoch). A follower fetching below a
// tiered leader's local log start, in the remote part, gets
// OFFSET_MOVED_TO_TIERED_STORAGE with the partition's log start (KIP-405). read_uncommitted consumers
// read up to the HWM; read_committed ones up to the last stable offset (the first
// offset of the oldest open transaction, or the HWM), with the aborted transactions
// of the range returned so the client drops their batches and the markers.
// Long poll: while fewer than min_bytes are available the request waits on its
// partitions' watchers until max_wait_ms passes; any HWM move re-reads.
// Record data goes out with sendfile(2) from the segment files (see fetchbody.go).
// Follower fetching (KIP-392): a v11+ consumer may fetch from any replica, a
// follower serving up to its own HWM; with --replica-selector-class set, a
// leader points a consumer whose rack another in-sync replica is on at that
// replica (PreferredReadReplica, no records) and answers at once, but only
// when by its last fetch that replica's log holds the fetch offset; else the
// leader serves the fetch itself.
// Replication throttle (KIP-73): a follower out of the ISR whose replica the
// topic's leader.replication.throttled.replicas lists on this leader gets no
// records while this broker's leader.replication.throttled.rate is exceeded (its
// fetch offset still counts), and a long poll waits no longer than the throttle.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/protocol"
	"github.com/strata-stream/strata/internal/quota"
	"github.com/strata-stream/strata/internal/replica"
	"github.com/strata-stream/strata/internal/storage"
	"github.com/strata-stream/strata/internal/throttle"
	"github.com/strata-stream/strata/internal/vfs"
)

func (h *Handlers) fetch(ctx context.Context, c *protocol.ConnInfo, r *protocol.Request) protocol.Response {
	req := r.Msg.(*kmsg.FetchRequest)
	replicaID := fetchReplicaID(req)
	var img *metadata.Image // names for the ids, not on the wire from v13
	if req.Version >= 13 {
		// A partition joining a session keeps the name its id has now.
		img = h.cluster.Image()
		for i := range req.Topics {
			if t := img.TopicByID(req.Topics[i].TopicID); t != nil {
				req.Topics[i].Topic = t.Name
			}
		}
	}
	// A follower needs CLUSTER_ACTION on the cluster; refused, its full
	// fetch opens no session (see refusedFollowerFetch).
	permitted := replicaID < 0 || h.authorizeCluster(ctx, c, kmsg.ACLOperationClusterAction)
	read, session := h.sessions.begin(req, permitted, img)
	if session.errorCode != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = session.errorCode
		return reply(resp)
	}
	if !permitted {
		resp := refusedFollowerFetch(read)
		session.finish(resp, nil)
		return reply(resp)
	}
	readable := h.topicCheck(ctx, c, kmsg.ACLOperationRead)
	if replicaID >= 0 {
		readable = func(string) bool { return true }
	}
	minBytes := int(req.MinBytes)
	if replicaID < 0 {
		read = h.capToQuotaWindow(c, read)
		minBytes = min(minBytes, max(int(read.MaxBytes), 0))
	}
	var (
		w        *replica.Watcher
		deadline = time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)

		resp                *kmsg.FetchResponse
		files               map[*kmsg.FetchResponseTopicPartition]*fileRecords
		total               int
		watched             []watchedPartition
		throttled           time.Duration
		answerNow, mustRead = false, true
	)
	for {
		if mustRead {
			resp, files, total, watched, throttled, answerNow = h.readFetch(read, replicaID, readable)
		}
		wait := deadline
		if throttled > 0 {
			wait = minTime(deadline, time.Now().Add(throttled))
		}
		if total >= minBytes || !time.Now().Before(wait) || ctx.Err() != nil || len(watched) == 0 || answerNow {
			var throttle time.Duration
			if replicaID < 0 { // replication traffic is not consumer bytes out
				throttle = max(h.throttle(c, metadata.QuotaConsumerByteRate, total), h.chargeRequest(ctx))
				if throttle > 0 {
					releaseFiles(files)
					return h.throttledFetch(c, req, session, total, throttle)
				}
			}
			files = session.finish(resp, files)
			if replicaID < 0 {
				h.observeFetch(resp, files)
			}
			out := h.fetchResponse(resp, files)
			out.Throttle = throttle
			return out
		}
		releaseFiles(files)
		files = nil
		// An answer without data stays right while none of its partitions
		// shows anything new (its log end, high-water mark, log start or
		// leadership): the wait reads again only after a change, so an idle
		// follower's session of thousands of partitions is read once per
		// long poll, not three times.
		reusable := total == 0 && throttled == 0
		if w == nil {
			h.cfg.Observer.DelayedFetch(1)
			defer h.cfg.Observer.DelayedFetch(-1)
			w = replica.NewWatcher()
			// A follower waits for new data, not for the HWM.
			for _, wp := range watched {
				if replicaID >= 0 {
					wp.p.WatchAppends(w)
				} else {
					wp.p.Watch(w)
				}
			}
			// One deferred call, not one per partition (each would be
			// allocated).
			defer func(registered []watchedPartition) {
				for _, wp := range registered {
					if replicaID >= 0 {
						wp.p.UnwatchAppends(w)
					} else {
						wp.p.Unwatch(w)
					}
				}
			}(watched)
			// Now that we watch no wake-up is missed: read again if
			// anything changed since the read.
			mustRead = !reusable || changedSince(watched)
			continue
		}
		timer := time.NewTimer(time.Until(wait))
		endWait := startWait(ctx)
		select {
		case <-w.C:
		case <-timer.C:
		case <-ctx.Done():
		}
		endWait()
		timer.Stop()
		mustRead = !reusable || changedSince(watched)
	}
}

// capToQuotaWindow returns read with its MaxBytes capped at the bytes the
// client's consumer_byte_rate lets it fetch at once without a throttle, given
// nothing fetched within the quota's window (rate x (Samples-1) x Window), as
// Kafka caps a consumer's fetch (ClientQuotaManager.maxValueInQuotaWindow):
// a larger answer would be throttled, and a throttled answer is empty
// (throttledFetch), so it would never be sent. read itself is not changed.
func (h *Handlers) capToQuotaWindow(c *protocol.ConnInfo, read *kmsg.FetchRequest) *kmsg.FetchRequest {
	if h.cfg.Quotas == nil || c == nil {
		return read
	}
	_, rate, ok := quota.Resolve(h.cluster.Image(), quota.UserOf(c.Principal()), c.ClientID(), metadata.QuotaConsumerByteRate)
	if !ok {
		return read
	}
	limit := rate * float64(quota.Samples-1) * quota.Window.Seconds()
	if limit >= float64(read.MaxBytes) {
		return read
	}
	capped := *read
	capped.MaxBytes = int32(limit)
	return &capped
}

// throttledFetch answers a consumer's fetch that must be throttled (its
// consumer_byte_rate or request_percentage quota exceeded) as Kafka does
// (KIP-219, KafkaApis.handleFetchRequest): the bytes it read are taken back
// from the byte-rate quota (unrecordQuotaSensor: they are not sent), and the
// answer is empty, carrying only throttle_time_ms, the connection muted for
// as long. The records are served by a fetch after the throttle. An
// incremental session keeps its id and epoch (nothing it caches changes, so
// the partitions with news are sent next time); a session this fetch opened
// is dropped and the answer names none, as Kafka opens a session only with a
// full answer (FullFetchContext.getThrottledResponse: INVALID_SESSION_ID).
func (h *Handlers) throttledFetch(c *protocol.ConnInfo, req *kmsg.FetchRequest, session sessionFetch,
	readBytes int, throttle time.Duration) protocol.Response {
	if readBytes > 0 {
		h.throttle(c, metadata.QuotaConsumerByteRate, -readBytes)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ThrottleMillis = int32(min(throttle.Milliseconds(), int64(^uint32(0)>>1)))
	if sess := session.session; sess != nil {
		if session.incremental {
			resp.SessionID = sess.id
		} else {
			h.sessions.mu.Lock()
			if h.sessions.byID[sess.id] == sess {
				h.sessions.removeLocked(sess)
			}
			h.sessions.mu.Unlock()
		}
	}
	out := reply(resp)
	out.Throttle = throttle
	return out
}

// refusedFollowerFetch answers a follower's fetch without CLUSTER_ACTION as
// Kafka's handleFetchRequest does: TOPIC_AUTHORIZATION_FAILED on each
// partition of read, its topic known or not, at once. Kafka also opens a
// session for such a full fetch; Strata does not (its answer names none, as
// Kafka's does when the cache is full), so a client without the right takes
// no slot of the cache, where a follower's session may evict consumers'.
func refusedFollowerFetch(read *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := read.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(read.Topics))
	for ti, rt := range read.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = noRecords
		}
	}
	return resp
}

// watchedPartition is a partition a fetch may wait on, with what it showed
// just before it was read.
type watchedPartition struct {
	p  *replica.Partition
	at partitionView
}

// partitionView is what a fetch's answer for a partition depends on, besides
// the request: the records readable (up to the log end or the high-water
// mark; transactions only change with the log end), the offsets the answer
// carries, and the leadership.
type partitionView struct {
	logEnd, highWatermark, logStart int64
	leaderEpoch                     int32
	leader                          bool
}

func viewOf(p *replica.Partition) partitionView {
	return partitionView{p.LogEndOffset(), p.HighWatermark(), p.LogStartOffset(), p.LeaderEpoch(), p.IsLeader()}
}

// changedSince reports whether any watched partition shows something other
// than when it was read.
func changedSince(watched []watchedPartition) bool {
	for _, wp := range watched {
		if viewOf(wp.p) != wp.at {
			return true
		}
	}
	return false
}

// fetchReplicaID is the replica id of a follower's fetch, -1 for a consumer's:
// a request header field before v15, in ReplicaState from v15.
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// readFetch reads every requested partition once. It returns the response, the
// file ranges to splice into it, the record bytes found, the partitions that
// could still produce data (to watch while long-polling), and, when a follower's
// partition was held back by the replication throttle, how long until the
// throttle lets data through again, and whether a consumer was pointed at a
// preferred read replica (the answer then goes out at once).
func (h *Handlers) readFetch(req *kmsg.FetchRequest, replicaID int32, readable func(topic string) bool) (
	resp *kmsg.FetchResponse, files map[*kmsg.FetchResponseTopicPartition]*fileRecords, total int, watched []watchedPartition,
	throttled time.Duration, answerNow bool) {
	resp = req.ResponseKind().(*kmsg.FetchResponse)
	files = map[*kmsg.FetchResponseTopicPartition]*fileRecords{}
	img := h.cluster.Image()
	budget := int(req.MaxBytes) // 0: the first batch found only, as Kafka reads it
	if req.Version < 3 {
		budget = int(^uint32(0) >> 1)
	}
	now := time.Now()
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	watched = make([]watchedPartition, 0, requestPartitions(req))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		// From v13 a topic comes by id, with the name fetch found for it
		// or the session kept ("": unknown, UNKNOWN_TOPIC_ID).
		name := rt.Topic
		var mt *metadata.Topic // looked up once for all the topic's partitions
		if name != "" {
			mt = img.Topic(name)
		}
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = noRecords // empty, not null: librdkafka rejects a null record set
			if name == "" {
				sp.ErrorCode = kerr.UnknownTopicID.Code
				continue
			}
			if !readable(name) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			iso, err := isolation(req.IsolationLevel)
			anyReplica := replicaID < 0 && req.Version >= 11 // KIP-392: consumers may read from followers
			var p *replica.Partition
			if err == nil {
				p, err = h.hostedPartitionOf(mt, name, rp.Partition)
			}
			if err == nil && req.Version >= 13 && p.TopicID != rt.TopicID {
				// The image knows the topic by this id, but the log hosted
				// under its name is a deleted topic's, not yet replaced.
				err = errInconsistentTopicID
			}
			if err == nil {
				err = p.CheckLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if err == nil && !anyReplica && !p.IsLeader() {
				// After the epoch, as Kafka's Partition.getLocalLog: a
				// client ahead of this broker's epoch waits for it.
				err = replica.ErrNotLeader
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				hintFetchLeader(img, resp, name, sp)
				answerNow = true // as Kafka, whose wait ends on an error reading a partition
				continue
			}
			if anyReplica && h.cfg.RackAwareReplicaSelector && req.Rack != "" && p.IsLeader() {
				if id := preferredReadReplica(img, p.ReadReplicas(rp.FetchOffset, now), h.cfg.NodeID, req.Rack); id != noPreferredReplica {
					sp.PreferredReadReplica = id
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = p.HighWatermark(), p.LastStableOffset(), p.LogStartOffset()
					answerNow = true
					continue
				}
			}
			watched = append(watched, watchedPartition{p, viewOf(p)})
			maxBytes := min(int(rp.PartitionMaxBytes), budget)
			if total > 0 && maxBytes <= 0 {
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = p.HighWatermark(), p.LastStableOffset(), p.FetchLogStart(replicaID >= 0)
				continue
			}
			var (
				res    replica.FetchResult
				bucket *throttle.Bucket // non-nil: a throttled follower
			)
			if replicaID >= 0 {
				bucket = h.replicas.LeaderThrottle(p, replicaID)
				res, err = h.readForFollower(p, replicaID, req, &rp, max(maxBytes, 1), sp)
				if err == nil && bucket != nil && res.Chunk.Size > 0 && bucket.Exceeded(now) {
					res.Chunk.Release() // its progress counted; its records wait
					res.Chunk = storage.Chunk{}
					if d := min(bucket.Delay(now), fetchThrottleMaxWait); throttled == 0 || d < throttled {
						throttled = d
					}
				}
				answerNow = answerNow || sp.DivergingEpoch.Epoch >= 0
			} else if d := consumerDivergence(req, &rp, p); d != nil {
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = p.HighWatermark(), p.LastStableOffset(), p.FetchLogStart(false)
				answerNow = true
				continue
			} else if anyReplica {
				res, err = p.ReadReplica(rp.FetchOffset, max(maxBytes, 1), iso)
			} else {
				res, err = p.Read(rp.FetchOffset, max(maxBytes, 1), iso)
			}
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			if res.Aborted != nil {
				sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(res.Aborted))
				for i, a := range res.Aborted {
					sp.AbortedTransactions[i] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
				}
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				hintFetchLeader(img, resp, name, sp)
				answerNow = true
				continue
			}
			if len(res.Remote) > 0 {
				// Read from the object store (tiered storage, below the local log start).
				if total == 0 || len(res.Remote) <= maxBytes {
					files[sp] = &fileRecords{data: res.Remote, n: len(res.Remote), records: countRecords(res.Remote)}
					total += len(res.Remote)
					budget -= len(res.Remote)
				}
				continue
			}
			if res.Chunk.Size == 0 {
				continue // checked before c exists: c escapes (files keeps its Release), so only a chunk with data allocates
			}
			c := res.Chunk
			if total > 0 && c.Size > maxBytes {
				c.Release() // only the first partition with data may exceed the limits
				continue
			}
			total += c.Size
			budget -= c.Size
			if bucket != nil {
				bucket.Record(c.Size, now)
			}
			if osf, ok := c.File.(vfs.OSFile); ok {
				files[sp] = &fileRecords{file: osf.OSFile(), off: c.Pos, n: c.Size, records: c.NextOffset - c.FirstOffset, release: c.Release}
				continue
			}
			data, err := c.Bytes()
			c.Release()
			if err != nil {
				sp.ErrorCode = errorCode(err)
				answerNow = true
				continue
			}
			sp.RecordBatches = data
		}
	}
	return resp, files, total, watched, throttled, answerNow
}

// consumerDivergence is where a consumer's log view split from p's, for a
// Fetch v12+ that names the epoch of the last batch it read (KIP-320): it is
// told as a follower is (Kafka checks every reader's epoch), and reads nothing.
func consumerDivergence(req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, p *replica.Partition) *replica.Diverging {
	if req.Version < 12 {
		return nil
	}
	return p.Diverging(rp.LastFetchedEpoch, rp.FetchOffset)
}

// readForFollower serves one partition of a follower's fetch, setting the
// diverging epoch on sp when the follower's log has split from the leader's.
func (h *Handlers) readForFollower(p *replica.Partition, replicaID int32, req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, maxBytes int, sp *kmsg.FetchResponseTopicPartition) (replica.FetchResult, error) {
	lastFetchedEpoch := int32(-1)
	if req.Version >= 12 {
		lastFetchedEpoch = rp.LastFetchedEpoch
	}
	replicaEpoch := int64(-1) // the follower's broker epoch, from v15 (KIP-903)
	if req.Version >= 15 {
		replicaEpoch = req.ReplicaState.Epoch
	}
	ff, err := p.ReadForFollower(replica.FollowerFetchRequest{
		ReplicaID: replicaID, BrokerEpoch: replicaEpoch, LeaderEpoch: rp.CurrentLeaderEpoch,
		FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset, LastFetchedEpoch: lastFetchedEpoch, MaxBytes: maxBytes,
	}, time.Now())
	if ff.Diverging != nil {
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = ff.Diverging.Epoch, ff.Diverging.EndOffset
	}
	return replica.FetchResult{Chunk: ff.Chunk, HighWatermark: ff.HighWatermark, LogStartOffset: ff.LogStartOffset}, err
}

func (h *Handlers) fetchResponse(resp *kmsg.FetchResponse, files map[*kmsg.FetchResponseTopicPartition]*fileRecords) protocol.Response {
	if len(files) == 0 {
		return reply(resp)
	}
	body, err := encodeFetchBody(resp, files)
	if err != nil {
		h.log.Error("encoding fetch response", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.Topics = nil
		return reply(resp)
	}
	return protocol.Response{Body: body}
}

// observeFetch reports the record data of a Fetch answer to the Observer.
func (h *Handlers) observeFetch(resp *kmsg.FetchResponse, files map[*kmsg.FetchResponseTopicPartition]*fileRecords) {
	var img *metadata.Image
	for ti := range resp.Topics {
		st := &resp.Topics[ti]
		name := st.Topic
		for pi := range st.Partitions {
			sp := &st.Partitions[pi]
			var bytes, records int64
			if f := files[sp]; f != nil {
				bytes, records = int64(f.n), f.records
			} else if len(sp.RecordBatches) > 0 {
				bytes = int64(len(sp.RecordBatches))
				records = countRecords(sp.RecordBatches)
			} else {
				continue
			}
			if name == "" { // v13+: topics by id
				if img == nil {
					img = h.cluster.Image()
				}
				if t := img.TopicByID(st.TopicID); t != nil {
					name = t.Name
				}
			}
			h.cfg.Observer.Fetched(name, sp.Partition, bytes, records)
		}
	}
}

// countRecords adds up the record counts in the headers of batches a fetch
// answers from memory (remote blocks, checksummed when read from the store; a
// log on a non-OS filesystem): the metric needs no CRC pass over the bytes.
func countRecords(b []byte) int64 {
	var n int64
	for len(b) >= batch.HeaderSize {
		h, _ := batch.ParseHeader(b)
		if h.Size() < batch.HeaderSize || h.Size() > len(b) {
			break
		}
		n += int64(h.NumRecords)
		b = b[h.Size():]
	}
	return n
}

func releaseFiles(files map[*kmsg.FetchResponseTopicPartition]*fileRecords) {
	for _, f := range files {
		if f.release != nil {
			f.release()
		}
	}
}

// isolation maps a request's isolation level; anything but 0 and 1 is
// INVALID_REQUEST, as Kafka cannot parse it either.
func isolation(level int8) (replica.Isolation, error) {
	switch iso := replica.Isolation(level); iso {
	case replica.ReadUncommitted, replica.ReadCommitted:
		return iso, nil
	}
	return 0, errInvalidIsolation
}

var noRecords = []byte{}

// fetchThrottleMaxWait bounds how long a follower's long poll waits for the
// replication throttle, so a rate raised or lifted takes effect soon.
const fetchThrottleMaxWait = 500 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

var (
	errInvalidIsolation    = &metadata.KafkaError{Code: kerr.InvalidRequest.Code, Msg: "unknown isolation level"}
	errInconsistentTopicID = &metadata.KafkaError{Code: kerr.InconsistentTopicID.Code, Msg: "the log's topic id is not the request's"}
)
