//go:build fdb

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
// # Building
//
// The bindings need the FoundationDB C client (libfdb_c and its headers),
// so this package is behind the build tag fdb: `go build ./...` and `go
// vet` leave it out, and work where the client is not installed. The
// bindings' module is required in groundskeeper's go.mod (so that `go mod
// tidy` keeps the version this package was written against), but nothing
// compiles it without the tag. To use it, install the client, then in your
// module:
//
//	go get github.com/apple/foundationdb/bindings/go@<the version matching your client>
//	go build -tags fdb ./...
//
// Its tests run locking/locktest's conformance suite and the
// linearizability check against the cluster named by FDB_CLUSTER_FILE, and
// skip when it is unset:
//
//	FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster go test -tags fdb ./locking/fdblock
//
// Unverified: this package has never been compiled or run by groundskeeper's
// own tests, because the machines they run on cannot install the
// FoundationDB client. It was written against the bindings' source (API
// version 710 and later) and follows the same contract as the etcd and
// Kubernetes backends, which are tested against real servers; treat it as
// untested until its tests have passed against your cluster.
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
