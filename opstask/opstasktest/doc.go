// Package opstasktest is the conformance suite every opstask.Store must
// pass. A store's test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		opstasktest.Run(t, func(t *testing.T) opstasktest.Harness {
//			s := memstore.New(nil)
//			return opstasktest.Harness{Store: s, Create: s.Create}
//		})
//	}
//
// The suite uses the Store interface, plus Harness.Create to make tasks the
// way users do (kubectl for the Kubernetes store). Each subtest gets a fresh
// harness and names its tasks after itself. Timestamps it writes are whole
// seconds, because Kubernetes stores them at that resolution.
//
// # Guarantees
//
// A store that passes Run has been shown to:
//
//   - list a created task with its identity (namespace, name, UID,
//     resourceVersion, creation time) and spec;
//   - round-trip a full status, bumping the resourceVersion, without
//     changing the spec;
//   - refuse a status update or a delete at a stale resourceVersion with
//     opstask.ErrConflict, writing nothing, and answer a missing task with
//     opstask.ErrNotFound; never change a task recreated under its name
//     through a copy that carries the earlier UID;
//   - let exactly one of several concurrent claims made on one read win;
//   - notify a watcher after a change, when it implements opstask.Watcher;
//   - run an opstask.Controller over it that executes the tasks of each
//     target one at a time, in queue order.
//
// # What it does not guarantee
//
//   - Anything of a store's Watcher when it does not implement one: that
//     subtest is skipped.
//   - Behaviour under faults (an API server that goes away, a watch that
//     expires): the suite runs against a healthy store.
//   - Scale: the suite uses a handful of tasks; paging and large lists are
//     the store's own tests' job.
package opstasktest
