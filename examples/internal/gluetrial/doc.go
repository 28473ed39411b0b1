// Package gluetrial is the operator of issue 25's trial, written again on
// the whole-job pieces: a controller-runtime operator for a made-up
// database (package api) that collects its backups by a retention policy
// with their data first, keeps its replicas' claims by KEP-1847's policy,
// reconfigures it only under the global lock, and runs one kind of one-off
// task. Each feature's glue is in a file of its own (backups.go, claims.go,
// lock.go, task.go; the shared set-up in setup.go), so that its lines can be
// counted; trial_test.go runs the operator on the real API server and MinIO.
package gluetrial
