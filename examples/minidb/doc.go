// Command minidb is a complete operator to copy: a controller-runtime
// operator for a made-up database, MiniDB (package api, CRDs in crd/),
// wired from groundskeeper's pieces with its own main, flags and manager
// set-up and no internal package. It
//
//   - collects each database's backups by its retention policy
//     (spec.retention, restic's syntax), their data first (backups.go);
//   - keeps its replicas' claims by KEP-1847's policy on scale-down and
//     deletion (claims.go);
//   - applies spec.config only while it holds the global lock, a
//     ConfigMap (lock.go);
//   - runs one kind of one-off task, reindex, from MiniDBTask resources
//     queued per database (task.go).
//
// Each feature's glue is in a file of its own, the shared set-up in
// setup.go and the process in main.go, as kubebuilder lays out an
// operator's cmd/main.go. minidb_test.go runs it on the real API server
// and MinIO (testenv).
//
//	kubectl apply -f examples/minidb/crd/minidb.example.com_minidbs.yaml \
//	  -f examples/minidb/crd/minidb.example.com_minidbbackups.yaml
//	go run ./examples/minidb --kubeconfig=$HOME/.kube/config
//
// The MiniDBTask CRD is installed by the operator itself (with the schema
// package opstask requires); the other two are applied as above.
package main
