package console

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/strata-stream/strata/internal/batch"
	"github.com/strata-stream/strata/internal/metadata"
	"github.com/strata-stream/strata/internal/replica"
)

const (
	defaultRecordLimit = 20
	maxRecordLimit     = 500
	// readChunkBytes is the most one Partition.Read returns (whole batches; one
	// batch larger than this still comes back alone).
	readChunkBytes = 1 << 20
	// maxReadBytes bounds what one page reads in total.
	maxReadBytes = 16 << 20
	// shownBytes is how much of a key, value or header key or value a page
	// shows; shownHeaders how many of a record's headers.
	shownBytes   = 1 << 10
	shownHeaders = 20
)

// recordView is one record as the page shows it.
type recordView struct {
	Offset      int64
	Timestamp   int64
	Key         shown
	Value       shown
	Headers     []headerView
	MoreHeaders int // headers not shown
}

type headerView struct{ Key, Value shown }

// shown is bytes made readable: text when they are printable UTF-8, else hex.
type shown struct {
	Text      string
	Null      bool
	Binary    bool
	Truncated bool
	Size      int
}

func show(b []byte, null bool) shown {
	if null {
		return shown{Null: true}
	}
	s := shown{Size: len(b)}
	if len(b) > shownBytes {
		cut := shownBytes
		for cut > shownBytes-utf8.UTFMax && !utf8.RuneStart(b[cut]) {
			cut-- // do not split a character
		}
		b, s.Truncated = b[:cut], true
	}
	if printable(b) {
		s.Text = string(b)
	} else {
		s.Binary = true
		s.Text = hex.EncodeToString(b)
	}
	return s
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

type recordsPage struct {
	base
	Topic      string
	Partition  int32
	Partitions []int32
	Limit      int
	From       int64 // first offset asked for
	HWM        int64
	LogStart   int64
	Records    []recordView
	NotHere    bool // not led here: Leader leads it, or none when !LeaderLive
	Leader     int32
	LeaderLive bool
}

// records shows the last records of one partition below its high-water mark.
func (c *Console) records(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	img := c.cfg.Cluster.Image()
	t := img.Topic(name)
	if t == nil {
		c.renderError(w, r, http.StatusNotFound, "Unknown topic", fmt.Sprintf("There is no topic %q.", name))
		return
	}
	q := r.URL.Query()
	part, limit := int64(0), int64(defaultRecordLimit)
	var err error
	if v := q.Get("partition"); v != "" {
		if part, err = strconv.ParseInt(v, 10, 32); err != nil || part < 0 || int(part) >= len(t.Partitions) {
			c.renderError(w, r, http.StatusBadRequest, "Bad partition", fmt.Sprintf("Topic %s has partitions 0 to %d, not %q.", name, len(t.Partitions)-1, v))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 32); err != nil || limit < 1 || limit > maxRecordLimit {
			c.renderError(w, r, http.StatusBadRequest, "Bad limit", fmt.Sprintf("limit must be 1 to %d, not %q.", maxRecordLimit, v))
			return
		}
	}
	pg := recordsPage{base: c.base("Records of "+name, "topics"), Topic: name, Partition: int32(part), Limit: int(limit)}
	for _, p := range t.Partitions {
		pg.Partitions = append(pg.Partitions, p.Index)
	}
	p, err := c.cfg.Replicas.Partition(name, int32(part))
	if err != nil || !p.IsLeader() {
		pg.NotHere, pg.Leader = true, t.Partitions[part].Leader
		pg.LeaderLive = pg.Leader != metadata.NoLeader && img.IsLive(pg.Leader)
		c.render(w, http.StatusOK, "records", pg)
		return
	}
	pg.HWM, pg.LogStart = p.HighWatermark(), logStart(p)
	pg.From = max(pg.LogStart, pg.HWM-limit)
	pg.Records, err = readRecords(p, pg.From, int(limit))
	if err != nil {
		pg.Error = "Reading records: " + err.Error()
	}
	c.render(w, http.StatusOK, "records", pg)
}

// readRecords reads up to limit records from offset on, below the high-water mark,
// through the replica layer, newest last. Control batches are skipped.
func readRecords(p *replica.Partition, from int64, limit int) ([]recordView, error) {
	var out []recordView
	next, total := from, 0
	for len(out) < limit && total < maxReadBytes {
		res, err := p.Read(next, readChunkBytes, replica.ReadUncommitted)
		if err != nil {
			return out, err
		}
		b, err := res.Data() // below a tiered partition's local start, the object store's
		res.Chunk.Release()
		if err != nil || len(b) == 0 {
			return out, err
		}
		total += len(b)
		if out, next, err = appendRecords(out, b, from, limit); err != nil {
			return out, err
		}
	}
	return out, nil
}

// appendRecords decodes the records at or after from in batches b; next is
// the offset after the last batch it went through.
func appendRecords(out []recordView, b []byte, from int64, limit int) (_ []recordView, next int64, err error) {
	it := batch.NewIter(b)
	for it.Next() && len(out) < limit {
		h := it.Header()
		next = h.LastOffset() + 1
		if h.Control() || h.LastOffset() < from {
			continue
		}
		err := batch.Records(it.Batch(), func(h batch.Header, rec batch.Record) error {
			off := h.BaseOffset + int64(rec.OffsetDelta)
			if off < from || len(out) == limit {
				return nil
			}
			ts := h.FirstTimestamp + rec.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			v := recordView{Offset: off, Timestamp: ts, Key: show(rec.Key, rec.Key == nil), Value: show(rec.Value, rec.Value == nil)}
			for _, hd := range rec.Headers[:min(len(rec.Headers), shownHeaders)] {
				v.Headers = append(v.Headers, headerView{Key: show([]byte(hd.Key), false), Value: show(hd.Value, hd.Value == nil)})
			}
			v.MoreHeaders = len(rec.Headers) - len(v.Headers)
			out = append(out, v)
			return nil
		})
		if err != nil {
			return out, next, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	return out, next, it.Err()
}
