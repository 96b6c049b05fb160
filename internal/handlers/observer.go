package handlers

// Observer is told about the record data and the delayed operations the handlers
// handle, for metrics (the metrics package implements it; handlers never import
// Prometheus). Calls come from every connection's goroutines at once: they must be
// quick and safe for concurrent use.
type Observer interface {
	// Produced reports record batches appended to a partition by a Produce: their
	// bytes as stored and their record count. An idempotent retry answered from the
	// producer state counts again, as in Kafka's bytes-in rate.
	Produced(topic string, partition int32, bytes, records int64)
	// Fetched reports record data a Fetch sends to a consumer: bytes of whole
	// batches and the records in them (the offsets they span).
	Fetched(topic string, partition int32, bytes, records int64)
	// DelayedProduce is +1 when a Produce starts waiting for acks=all and -1 when
	// it stops; DelayedFetch the same for a Fetch parked until min_bytes arrive.
	DelayedProduce(delta int)
	DelayedFetch(delta int)
}

// nopObserver is the Observer when none is configured.
type nopObserver struct{}

func (nopObserver) Produced(string, int32, int64, int64) {}
func (nopObserver) Fetched(string, int32, int64, int64)  {}
func (nopObserver) DelayedProduce(int)                   {}
func (nopObserver) DelayedFetch(int)                     {}
