package replica

import "sync"

// drainedQueue is a queue that one goroutine at a time drains: the push that
// finds none running starts it (on a goroutine the Manager owns), and it stops
// when it finds the queue empty. The deleter and the ISR sender have one each.
type drainedQueue[T any] struct {
	mu      sync.Mutex
	items   []T
	running bool
}

// push queues v and reports whether the caller must start the drainer.
func (q *drainedQueue[T]) push(v T) (start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = append(q.items, v)
	start = !q.running
	q.running = true
	return start
}

// take hands the drainer up to n items (n <= 0: all of them). With none
// queued, or with stop set, it returns none and the drainer must return.
func (q *drainedQueue[T]) take(n int, stop bool) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 || stop {
		q.running = false
		return nil
	}
	if n <= 0 || n > len(q.items) {
		n = len(q.items)
	}
	out := q.items[:n:n]
	q.items = q.items[n:]
	return out
}

// abandon is for a drainer that could not start (the Manager is closing):
// it empties the queue and returns what was in it.
func (q *drainedQueue[T]) abandon() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items, q.running = nil, false
	return out
}
