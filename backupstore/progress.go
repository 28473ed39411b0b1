package backupstore

import "sync"

// notifier calls a progress callback from one goroutine of its own, in the
// order the totals were sent, so that no worker waits for the callback and
// no lock is held while it runs. The queue is unbounded: a send never
// blocks, and a slow callback falls behind instead of slowing the work.
type notifier[T any] struct {
	f      func(T)
	mu     sync.Mutex
	queue  []T
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// newNotifier starts a notifier for f; nil f gives a notifier that drops
// everything. Close it to wait for the last call.
func newNotifier[T any](f func(T)) *notifier[T] {
	n := &notifier[T]{f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if f == nil {
		close(n.done)
		return n
	}
	go n.run()
	return n
}

// send queues v. Callers that need the calls in the order of their totals
// send while holding the lock that orders the totals: send only takes the
// queue's own lock, briefly.
func (n *notifier[T]) send(v T) {
	if n.f == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, v)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close waits until every value sent has been passed to the callback. No
// send may follow.
func (n *notifier[T]) close() {
	if n.f != nil {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
	<-n.done
}

func (n *notifier[T]) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		q, closed := n.queue, n.closed
		n.queue = nil
		n.mu.Unlock()
		for _, v := range q {
			n.f(v)
		}
		if len(q) == 0 {
			if closed {
				return
			}
			<-n.wake
		}
	}
}
