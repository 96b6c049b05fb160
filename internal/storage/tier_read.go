package storage

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/remote"
)

// Read returns whole batches from the remote part of the log starting with the
// one that holds offset (or, in a gap, the first after it), at most maxBytes
// unless the first batch alone is larger, and never past the end of one block.
// It returns the bytes and the offset the next read should start at. An offset
// outside the manifest's [Start, End) gives ErrOffsetOutOfRange; an unreachable
// store or a missing object ErrRemoteUnavailable; a block that fails its
// checksum ErrRemoteCorrupt. Blocks go through the tier's BlockCache, and the
// block after the one read is fetched ahead into it.
func (t *Tier) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, int64, error) {
	t.stats.remoteReads.Add(1)
	b, next, err := t.read(ctx, offset, maxBytes)
	if err != nil {
		t.stats.remoteReadErrors.Add(1)
	}
	return b, next, err
}

func (t *Tier) read(ctx context.Context, offset int64, maxBytes int) ([]byte, int64, error) {
	m, _ := t.manifestCopy()
	i := m.segmentFor(offset)
	if offset < m.Start || i == len(m.Segments) {
		return nil, offset, fmt.Errorf("%w: offset %d, remote log is [%d, %d)", ErrOffsetOutOfRange, offset, m.Start, m.End)
	}
	seg := m.Segments[i]
	blocks, err := t.blocks(ctx, seg)
	if err != nil {
		return nil, offset, err
	}
	// The last block whose first batch starts at or before offset.
	j := 0
	for j+1 < len(blocks) && blocks[j+1].BaseOffset <= offset {
		j++
	}
	key := seg.dataKey(t.cfg.Prefix)
	data, err := t.block(ctx, key, blocks[j])
	if err != nil {
		return nil, offset, err
	}
	if j+1 < len(blocks) && t.cfg.Cache != nil {
		t.cfg.Cache.readAhead(key, blocks[j+1], t.fetchBlock)
	}
	// Skip the batches that end before offset, then keep whole batches.
	var start, end int
	next := offset
	for p := 0; p < len(data); {
		h, err := batch.ParseHeader(data[p:])
		if err != nil || h.Size() > len(data)-p || h.Size() < batch.HeaderSize {
			return nil, offset, fmt.Errorf("%w: %s block at %d: batch at %d does not parse", ErrRemoteCorrupt, key, blocks[j].Pos, p)
		}
		switch {
		case h.NextOffset() <= offset:
			start = p + h.Size()
		case end > start && end-start+h.Size() > maxBytes:
			return data[start:end], next, nil
		default:
			end = p + h.Size()
			next = h.NextOffset()
		}
		p += h.Size()
	}
	if end == start {
		// offset lies past this block's batches (a gap before the next).
		next = seg.Next
		if j+1 < len(blocks) {
			next = blocks[j+1].BaseOffset
		}
		return nil, next, nil
	}
	return data[start:end], next, nil
}

// blocks returns the segment's block index, loading it on first use.
func (t *Tier) blocks(ctx context.Context, seg remoteSegment) ([]block, error) {
	if blocks, ok := t.loadedBlocks(seg.Base); ok {
		return blocks, nil
	}
	// A segment object holds its index after its bytes; before layout 2 the
	// index was an object of its own.
	key, off, n := seg.key(t.cfg.Prefix, indexSuffix), int64(0), int64(-1)
	if seg.IndexSize > 0 {
		key, off, n = seg.dataKey(t.cfg.Prefix), seg.Size, seg.IndexSize
	}
	b, err := t.cfg.Store.Get(ctx, key, off, n)
	if errors.Is(err, remote.ErrRange) || err == nil && int64(len(b)) != n && n >= 0 {
		t.stats.corruptBlocks.Add(1)
		return nil, fmt.Errorf("%w: %s is shorter than its manifest says", ErrRemoteCorrupt, key)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	}
	blocks, err := decodeBlocks(b, seg)
	if err != nil {
		t.stats.corruptBlocks.Add(1)
		return nil, fmt.Errorf("%w: %s: %v", ErrRemoteCorrupt, key, err)
	}
	t.keepBlocks(seg.Base, blocks)
	return blocks, nil
}

// loadedBlocks returns the block index of the segment at base, if loaded.
func (t *Tier) loadedBlocks(base int64) ([]block, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	blocks, ok := t.mu.blocks[base]
	return blocks, ok
}

// keepBlocks keeps the block index of the segment at base.
func (t *Tier) keepBlocks(base int64, blocks []block) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.blocks[base] = blocks
}

// block returns one verified block, from the cache when it is there.
func (t *Tier) block(ctx context.Context, key string, k block) ([]byte, error) {
	if t.cfg.Cache != nil {
		if b, ok := t.cfg.Cache.get(key, k.Pos); ok {
			return b, nil
		}
	}
	b, err := t.fetchBlock(ctx, key, k)
	if err != nil {
		if errors.Is(err, ErrRemoteCorrupt) {
			t.stats.corruptBlocks.Add(1)
		}
		return nil, err
	}
	if t.cfg.Cache != nil {
		t.cfg.Cache.put(key, k.Pos, b)
	}
	return b, nil
}

// fetchBlock reads one block from the store and checks its length and checksum.
func (t *Tier) fetchBlock(ctx context.Context, key string, k block) ([]byte, error) {
	b, err := t.cfg.Store.Get(ctx, key, k.Pos, int64(k.Size))
	switch {
	case errors.Is(err, remote.ErrRange):
		return nil, fmt.Errorf("%w: %s is shorter than its index says", ErrRemoteCorrupt, key)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrRemoteUnavailable, err)
	case len(b) != int(k.Size) || blockCRC(b) != k.CRC:
		return nil, fmt.Errorf("%w: %s block at %d fails its checksum", ErrRemoteCorrupt, key, k.Pos)
	}
	return b, nil
}

// readAheadTimeout bounds a background read-ahead, so a hung store holds no
// goroutine for long.
const readAheadTimeout = 30 * time.Second

// BlockCache is a byte-bounded LRU of verified remote blocks, shared by every
// tier of a broker (--remote-cache-size). Safe for concurrent use.
type BlockCache struct {
	capacity int64

	mu struct {
		sync.Mutex
		size     int64
		lru      *list.List // of *cacheEntry, most recent first
		entries  map[cacheKey]*list.Element
		inflight map[cacheKey]bool // read-ahead fetches under way
	}
	hits, misses int64 // under mu
}

type cacheKey struct {
	object string
	pos    int64
}

type cacheEntry struct {
	key  cacheKey
	data []byte
}

// NewBlockCache returns a cache holding at most capacity bytes (0 caches
// nothing).
func NewBlockCache(capacity int64) *BlockCache {
	c := &BlockCache{capacity: capacity}
	c.mu.lru = list.New()
	c.mu.entries = make(map[cacheKey]*list.Element)
	c.mu.inflight = make(map[cacheKey]bool)
	return c
}

func (c *BlockCache) get(object string, pos int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.entries[cacheKey{object, pos}]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.mu.lru.MoveToFront(e)
	return e.Value.(*cacheEntry).data, true
}

func (c *BlockCache) put(object string, pos int64, data []byte) {
	if int64(len(data)) > c.capacity {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{object, pos}
	if _, ok := c.mu.entries[k]; ok {
		return
	}
	c.mu.entries[k] = c.mu.lru.PushFront(&cacheEntry{key: k, data: data})
	c.mu.size += int64(len(data))
	for c.mu.size > c.capacity {
		e := c.mu.lru.Back()
		ce := e.Value.(*cacheEntry)
		c.mu.lru.Remove(e)
		delete(c.mu.entries, ce.key)
		c.mu.size -= int64(len(ce.data))
	}
}

// forget drops every block of object (deleted by retention).
func (c *BlockCache) forget(object string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.mu.lru.Front(); e != nil; {
		next := e.Next()
		if ce := e.Value.(*cacheEntry); ce.key.object == object {
			c.mu.lru.Remove(e)
			delete(c.mu.entries, ce.key)
			c.mu.size -= int64(len(ce.data))
		}
		e = next
	}
}

// readAhead fetches block k of object into the cache in the background unless
// it is cached or already being fetched. Errors are dropped: the read that
// needs the block fetches it again and reports them.
func (c *BlockCache) readAhead(object string, k block, fetch func(context.Context, string, block) ([]byte, error)) {
	key := cacheKey{object, k.Pos}
	if !c.startFetch(key, k.Size) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), readAheadTimeout)
		defer cancel()
		b, err := fetch(ctx, object, k)
		if err == nil {
			c.put(object, k.Pos, b)
		}
		c.endFetch(key)
	}()
}

// startFetch marks the block at key as being fetched, unless it is cached,
// already being fetched or larger than the cache (size bytes): false then.
func (c *BlockCache) startFetch(key cacheKey, size uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, cached := c.mu.entries[key]
	if cached || c.mu.inflight[key] || int64(size) > c.capacity {
		return false
	}
	c.mu.inflight[key] = true
	return true
}

// endFetch marks the fetch of the block at key done.
func (c *BlockCache) endFetch(key cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.inflight, key)
}

// CacheStats is a snapshot of a BlockCache.
type CacheStats struct {
	Bytes, Capacity int64
	Blocks          int
	Hits, Misses    int64
}

// Stats returns the cache's size and hit counters.
func (c *BlockCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Bytes: c.mu.size, Capacity: c.capacity, Blocks: c.mu.lru.Len(), Hits: c.hits, Misses: c.misses}
}

// OffsetForTimestamp answers ListOffsets for a timestamp over the remote part:
// the first record at or after the remote start whose timestamp is >= ts, found
// through the segments' and blocks' max timestamps. ok is false when every
// remote record is older (the caller then looks in the local log). Records
// are held to maxRecord as by Log.OffsetForTimestamp.
func (t *Tier) OffsetForTimestamp(ctx context.Context, ts int64, maxRecord int) (offset, timestamp int64, ok bool, err error) {
	m, _ := t.manifestCopy()
	q := newTimestampLookup(ts, m.Start, maxRecord)
	defer q.release()
	for _, seg := range m.Segments {
		if seg.MaxTimestamp < ts || seg.Next <= m.Start {
			continue
		}
		blocks, err := t.blocks(ctx, seg)
		if err != nil {
			return 0, 0, false, err
		}
		key := seg.dataKey(t.cfg.Prefix)
		for _, k := range blocks {
			if k.MaxTimestamp < ts {
				continue
			}
			data, err := t.block(ctx, key, k)
			if err != nil {
				return 0, 0, false, err
			}
			for p := 0; p < len(data); {
				h, err := batch.ParseHeader(data[p:])
				if err != nil || h.Size() > len(data)-p || h.Size() < batch.HeaderSize {
					return 0, 0, false, fmt.Errorf("%w: %s block at %d: batch at %d does not parse", ErrRemoteCorrupt, key, k.Pos, p)
				}
				if h.MaxTimestamp >= ts && h.NextOffset() > m.Start {
					off, tsFound, found, err := q.in(data[p:p+h.Size()], &h)
					if err != nil {
						if lf := limitFailure(fmt.Sprintf("%s block at %d: batch at %d", key, k.Pos, p), err); lf != nil {
							return 0, 0, false, lf
						}
						return 0, 0, false, fmt.Errorf("%w: %s: %w", ErrRemoteCorrupt, key, err)
					}
					if found {
						return off, tsFound, true, nil
					}
				}
				p += h.Size()
			}
		}
	}
	return 0, 0, false, nil
}
