package share

import (
	"slices"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/replica"
)

// acquisition is the outcome of one acquisition on a share partition.
type acquisition struct {
	data     []byte // the batches holding the acquired offsets
	acquired []AcquiredRange
	// full: nothing was acquirable because the in-flight window is full (only
	// acknowledgements and expiring locks make room); held: and the member
	// itself holds records in it (see heldWait).
	full, held bool
}

// readCache is the last read of the log of a share partition: whole batches from
// offset from on, kept so that the next acquisitions take their records from
// memory instead of reading the log again. It belongs to one loaded state (p):
// the log below the high watermark does not change under one leader epoch, and a
// new epoch loads a new state. Its bytes are never written after the read, so
// responses may point into them.
type readCache struct {
	p         *Partition
	committed bool // read read_committed: below the last stable offset, aborted batches marked
	from      int64
	data      []byte
	spans     []span
}

// span is one batch of a readCache: data[lo:hi].
type span struct {
	lo, hi  int
	first   int64
	last    int64
	control bool
	aborted bool // of an aborted transaction, in a read_committed read
}

// skip reports whether the batch is never delivered: a transaction marker, or
// an aborted transaction's records read read_committed.
func (s span) skip() bool { return s.control || s.aborted }

// holds reports whether the cache, read for p at the isolation level
// committed says, has the batch holding offset o (or is where a read from o
// began: the log may lack o itself).
func (c *readCache) holds(p *Partition, committed bool, o int64) bool {
	return c.p == p && c.committed == committed && len(c.spans) > 0 && c.from <= o && o <= c.spans[len(c.spans)-1].last
}

// span returns the index of the batch holding offset o, or of the first past it
// (len(c.spans): none).
func (c *readCache) span(o int64) int {
	i := 0
	for i < len(c.spans) && c.spans[i].last < o {
		i++
	}
	return i
}

// bytesFrom is the size of the cache's batches from the one holding offset o on.
func (c *readCache) bytesFrom(o int64) int {
	if i := c.span(o); i < len(c.spans) {
		return len(c.data) - c.spans[i].lo
	}
	return 0
}

// end is the offset just past the cache's last batch.
func (c *readCache) end() int64 {
	if len(c.spans) == 0 {
		return c.from
	}
	return c.spans[len(c.spans)-1].last + 1
}

// trim drops the batches below start (done: they can never be delivered again),
// and everything once nothing is left.
func (c *readCache) trim(start int64) {
	i := 0
	for i < len(c.spans) && c.spans[i].last < start {
		i++
	}
	c.spans = c.spans[i:]
	if len(c.spans) == 0 {
		*c = readCache{}
	}
}

// heldWait bounds the long poll of a fetch that finds the in-flight window full
// while its member holds records in it. A client that piggybacks its
// acknowledgements on its next ShareFetch (franz-go sends the next fetch as soon
// as the application takes a poll's records, before it accepts them) cannot
// send them while this fetch waits, and the window frees up only when such
// acknowledgements arrive: held for the whole MaxWait, every member stalls.
const heldWait = 25 * time.Millisecond

// acquireLocked acquires up to maxRecords offsets of sp for member, reading the
// log when the read cache does not hold them; it may release sp.mu meanwhile
// (the read itself runs without it) and returns with sp.mu held.
func (m *Manager) acquireLocked(sp *sharePartition, rp *replica.Partition, member string, cfg GroupConfig, maxRecords, maxBytes int, strict bool) (acquisition, error) {
	reads := 0
	for {
		p := sp.p
		if p == nil {
			return acquisition{}, nil // dropped while the log was read; the next request reloads
		}
		now := m.cfg.Now()
		if archived, _ := p.Expire(now, cfg.Limits); len(archived) > 0 {
			m.maybeDeadLetterLocked(sp) // its end saves the state
		}
		// The log start, below the local one on a tiered partition: records
		// still in the object store are delivered. Unknown (the store's
		// manifest unread), the start stays where it is.
		if ls, err := rp.ReadableLogStart(); err == nil && ls > p.Start() {
			p.AdvanceTo(ls)
		}
		// The end of what the group may read: the high watermark, or the last
		// stable offset for read_committed.
		from, hwm := p.FetchOffset(), rp.HighWatermark()
		if cfg.ReadCommitted {
			hwm = rp.LastStableOffset()
		}
		if from >= hwm {
			return acquisition{}, nil // caught up: appends bring more
		}
		want := int64(maxRecords)
		if from >= p.End() {
			room := p.Room(cfg.Limits)
			if room <= 0 {
				return acquisition{full: true, held: p.Holds(member)}, nil
			}
			want = min(want, room)
		}
		c := &sp.cache
		c.trim(p.Start())
		// Read when the cache lacks from, or holds less than the acquisition
		// could take, in offsets and in bytes (the first time round: a read may
		// end early, at a segment's end).
		if !c.holds(p, cfg.ReadCommitted, from) || (reads == 0 && c.end() < min(hwm, from+want) && c.bytesFrom(from) < maxBytes) {
			if reads == 2 {
				// Other members took what this fetch read, twice over; it
				// waits for the next change like any other.
				return acquisition{}, nil
			}
			read, err := m.readLocked(sp, rp, p, cfg.ReadCommitted, from, maxRecords, maxBytes)
			if err != nil {
				return acquisition{}, err
			}
			if read {
				reads++
			}
			continue
		}
		return m.acquireCachedLocked(sp, p, member, now, cfg, from, maxRecords, maxBytes, strict), nil
	}
}

// readLocked reads the log of sp from offset from into sp.cache for state p
// (read_committed when committed), and reports whether it did. It releases sp.mu during the read: one read at a
// time per share partition (sp.readMu); when the state or the cache changed
// meanwhile (another fetch's read), it reads nothing and the caller looks again.
func (m *Manager) readLocked(sp *sharePartition, rp *replica.Partition, p *Partition, committed bool, from int64, maxRecords, maxBytes int) (bool, error) {
	gen := sp.cacheGen
	sp.unlocked(sp.readMu.Lock) // readMu is taken before mu
	defer sp.readMu.Unlock()
	if sp.p != p || sp.cacheGen != gen {
		return false, nil
	}
	n := readBytes(maxRecords, maxBytes, sp.recordBytes)
	var data []byte
	var spans []span
	var err error
	sp.unlocked(func() { data, spans, err = readSpans(rp, from, n, committed) })
	if err != nil {
		return false, err
	}
	m.counts.reads.Add(1)
	m.counts.readBytes.Add(int64(len(data)))
	if sp.p != p {
		return true, nil
	}
	sp.cacheGen++
	sp.cache = readCache{p: p, committed: committed, from: from, data: data, spans: spans}
	if k := len(spans); k > 0 {
		if offsets := spans[k-1].last - spans[0].first + 1; offsets > 0 {
			sp.recordBytes = float64(len(data)) / float64(offsets)
		}
	}
	return true, nil
}

// readSpans reads up to maxBytes of whole batches of rp from offset from into
// memory and splits them into batches (up to the first that does not parse).
// A read_committed read (committed) ends at the last stable offset and marks
// the batches of aborted transactions.
func readSpans(rp *replica.Partition, from int64, maxBytes int, committed bool) ([]byte, []span, error) {
	iso := replica.ReadUncommitted
	if committed {
		iso = replica.ReadCommitted
	}
	res, err := rp.Read(from, maxBytes, iso)
	if err != nil {
		return nil, nil, err
	}
	defer res.Chunk.Release()
	data, err := res.Data() // the object store's part of a tiered partition, or the local log's
	if err != nil || len(data) == 0 {
		return nil, nil, err
	}
	var spans []span
	for lo := 0; lo < len(data); {
		n, err := batch.FrameSize(data[lo:])
		if err != nil || n > len(data)-lo {
			break
		}
		h, err := batch.ParseHeader(data[lo : lo+n])
		if err != nil {
			break
		}
		s := span{lo: lo, hi: lo + n, first: h.BaseOffset, last: h.LastOffset(), control: h.Control()}
		s.aborted = !s.control && h.Transactional() && slices.ContainsFunc(res.Aborted, func(a replica.AbortedTxn) bool {
			return a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset
		})
		spans = append(spans, s)
		lo += n
	}
	return data, spans, nil
}

// acquireCachedLocked acquires for member from sp's read cache, which holds from.
// It looks only at the batches a log read of maxBytes from from would return:
// whole batches within maxBytes, the first one whatever its size so that the
// member makes progress (KIP-74). Transaction markers and (read_committed)
// aborted batches do not count: they are never sent, and one first would
// otherwise leave nothing to acquire. The
// batches it answers with are among the ones counted, so the answer is at most
// maxBytes unless it is one larger batch.
func (m *Manager) acquireCachedLocked(sp *sharePartition, p *Partition, member string, now time.Time, cfg GroupConfig, from int64, maxRecords, maxBytes int, strict bool) acquisition {
	c := &sp.cache
	spans := c.spans[c.span(from):]
	n, size := 0, 0
	for ; n < len(spans); n++ {
		if s := spans[n]; !s.skip() {
			if size > 0 && size+s.hi-s.lo > maxBytes {
				break
			}
			size += s.hi - s.lo
		}
	}
	spans = spans[:n]
	batches := sp.batches[:0]
	for _, s := range spans {
		batches = append(batches, Batch{First: s.first, Last: s.last, Control: s.skip()})
	}
	sp.batches = batches
	acquired := p.Acquire(member, now, cfg.Limits, batches, maxRecords, strict)
	if len(acquired) == 0 {
		return acquisition{}
	}
	m.armExpiryLocked(sp, cfg)
	// The batches holding acquired offsets, in order: one slice of the cache
	// when they lie side by side (the usual case), else a copy.
	var data []byte
	end := -1 // data's end in c.data while data is a slice of it, -1 once a copy
	a := 0
	for _, s := range spans {
		for a < len(acquired) && acquired[a].Last < s.first {
			a++
		}
		if a == len(acquired) {
			break
		}
		if acquired[a].First > s.last {
			continue
		}
		switch {
		case data == nil:
			data, end = c.data[s.lo:s.hi:s.hi], s.hi
		case end == s.lo:
			data, end = c.data[s.lo-len(data):s.hi:s.hi], s.hi
		case end >= 0:
			data = append(append(make([]byte, 0, len(data)+s.hi-s.lo), data...), c.data[s.lo:s.hi]...)
			end = -1
		default:
			data = append(data, c.data[s.lo:s.hi]...)
		}
	}
	return acquisition{data: data, acquired: acquired}
}

// minReadBytes is the least a share fetch reads from the log at a time.
const minReadBytes = 64 << 10

// readBytes bounds one read of the log for an acquisition of at most maxRecords
// (a request allowing maxBytes), given the mean bytes per offset of the previous
// read (0: none yet). The read is copied into memory (the read cache) and only
// the acquired batches are sent, so reading the whole of a client's maxBytes
// (franz-go asks for 50 MiB) for the few hundred records a member may take
// would copy up to 50 MiB per read. Twice the estimate leaves room for records
// already acquired or acknowledged inside the range, and serves the next
// acquisition from memory.
func readBytes(maxRecords, maxBytes int, recordBytes float64) int {
	if recordBytes <= 0 {
		return min(maxBytes, minReadBytes)
	}
	want := 2 * float64(maxRecords) * recordBytes
	if want >= float64(maxBytes) {
		return maxBytes
	}
	return min(maxBytes, max(int(want), minReadBytes))
}
