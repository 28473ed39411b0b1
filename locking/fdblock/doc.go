// Package fdblock is a locking.Backend on FoundationDB, through the official
// Go bindings (github.com/apple/foundationdb/bindings/go/src/fdb). With it, a
// Lock reads and writes the very keys the FoundationDB operator uses, so
// operators built on groundskeeper and FoundationDB operator instances
// coordinate through one lock.
//
//	fdb.MustAPIVersion(710)
//	db, err := fdb.OpenDatabase(clusterFile)
//	l, err := locking.New(locking.Config{Backend: fdblock.New(db), LockID: lockID})
//
// It is a Go module of its own, which groundskeeper's CI has never compiled
// or run: read Not built or tested in CI before you depend on it.
//
// # Not built or tested in CI
//
// This package is a Go module of its own
// (github.com/groundskeeper-io/groundskeeper/locking/fdblock), outside the
// main groundskeeper module, and its code has never been compiled or run by
// groundskeeper's CI. The official bindings need the FoundationDB C client
// (libfdb_c and its headers) even to compile, and neither a FoundationDB
// server nor the C client can be installed on the machines groundskeeper is
// built and tested on: Debian has no package of it, and nothing else those
// machines can install ships libfdb_c. We chose a module of its own over
// the build tag fdb it used to sit behind inside the main module, so that:
//
//   - the main module promises only what CI builds and tests: `go build
//     ./...`, `go vet ./...`, staticcheck and `go mod tidy` of the main
//     module never see this package, and its go.mod does not require the
//     bindings, so no user of groundskeeper downloads them;
//   - whoever uses FoundationDB opts in explicitly, by requiring this
//     module, and gets the bindings' version it was written against.
//
// It was written against the bindings' source (API version 710 and later)
// and follows the same Backend contract as the etcd and Kubernetes
// backends, which are tested against real servers; treat it as untested
// until its tests have passed against your cluster. To use it, install the
// FoundationDB client, then in your module:
//
//	go get github.com/groundskeeper-io/groundskeeper/locking/fdblock
//	go get github.com/apple/foundationdb/bindings/go@<the version matching your client>
//
// Its tests run locking/locktest's conformance suite and the
// linearizability check against the cluster named by FDB_CLUSTER_FILE, and
// skip when it is unset; from this directory:
//
//	FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster go test .
//
// Inside this repository the go.mod replaces the parent module with ../..,
// so the package builds against the code beside it.
//
// # Guarantees
//
//   - One Update is one FoundationDB transaction, committed at most once
//     (no fdb.Database.Transact retry loop: retrying is the Lock's job). A
//     transaction that wrote nothing is not committed.
//   - Isolation is FoundationDB's own: serializable, with reads at one read
//     version, read-your-writes, and conflict ranges for every key and
//     range read, so a prefix read conflicts with inserts and deletions in
//     the range.
//   - The transaction can access the system key space (\xff...), where the
//     FoundationDB operator keeps its lock.
//   - A canceled context cancels the transaction.
//
// # Errors
//
// FoundationDB errors are translated, and fdb.Error is not exposed:
//
//   - not_committed (1020) and transaction_too_old (1007):
//     locking.ErrConflict;
//   - any failure of a commit that was sent, commit_unknown_result (1021)
//     among them: locking.ErrUnknownResult, which also wraps
//     locking.ErrUnavailable;
//   - any other failure of a read: locking.ErrUnavailable, or the context's
//     error if it was canceled;
//   - invalid operations and size limits (2000, 2101-2103): a plain error
//     with FoundationDB's message.
//
// # As
//
// Backend.As supports *fdb.Database.
package fdblock
