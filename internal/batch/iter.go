package batch

// Iter walks a byte slice holding concatenated batches (a Produce request's Records
// field, or a range read from a segment), validating each batch with Validate. A
// trailing partial batch is an error (ErrTruncated), never silently dropped. Iter
// does not allocate.
//
//	it := batch.NewIter(records)
//	for it.Next() {
//		h, b := it.Header(), it.Batch()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type Iter struct {
	buf []byte
	pos int // start of the next batch in buf
	cur []byte
	h   Header
	err error
	// stored selects ValidateStored (batches read back from a log) over Validate.
	stored bool
	// validated skips the CRC: the bytes passed a NewIter (or, stored,
	// a NewStoredIter) walk already.
	validated bool
}

// NewIter returns an Iter over b.
func NewIter(b []byte) Iter { return Iter{buf: b} }

// NewStoredIter returns an Iter over batches as a log stores them (a replica's
// fetch response, a segment), validating each with ValidateStored, so batches
// thinned by compaction pass.
func NewStoredIter(b []byte) Iter { return Iter{buf: b, stored: true} }

// NewValidatedIter returns an Iter over b that a NewIter walk has already
// validated to its end without error, with no byte the CRC covers changed since.
// It makes every check of Validate except the CRC, the one whose cost grows with
// the bytes, so a produced batch's CRC is computed once between the request and
// the disk.
func NewValidatedIter(b []byte) Iter { return Iter{buf: b, validated: true} }

// NewValidatedStoredIter is NewValidatedIter for stored batches: b passed a
// NewStoredIter walk to its end (a follower's log appended it), so a second walk
// over the same bytes (producer and transaction state) skips the CRC.
func NewValidatedStoredIter(b []byte) Iter { return Iter{buf: b, stored: true, validated: true} }

// Next advances to the next batch. It returns false at the end of the input or at
// the first bad batch; Err tells which.
func (it *Iter) Next() bool {
	if it.err != nil || it.pos >= len(it.buf) {
		it.cur = nil
		return false
	}
	rest := it.buf[it.pos:]
	size, err := FrameSize(rest)
	if err == nil && size > len(rest) {
		err = ErrTruncated
	}
	if err != nil {
		it.err, it.cur = err, nil
		return false
	}
	it.cur = rest[:size:size]
	if it.h, err = validate(it.cur, it.stored, !it.validated); err != nil {
		it.err, it.cur = err, nil
		return false
	}
	it.pos += size
	return true
}

// Batch returns the current batch's bytes; they alias the input.
func (it *Iter) Batch() []byte { return it.cur }

// Header returns the current batch's header.
func (it *Iter) Header() Header { return it.h }

// Pos returns the offset in the input just past the current batch (after a failed
// Next: the start of the bad batch).
func (it *Iter) Pos() int { return it.pos }

// Err returns the error that stopped the iteration, or nil at a clean end.
func (it *Iter) Err() error { return it.err }
