// Package backupstore manages backup data in object stores through
// gocloud.dev/blob: opening a bucket from a URL and credentials held in a
// Kubernetes Secret, deleting everything under a prefix fast and never
// outside it, copying backups between stores, and the per-entry prefixes of
// shared buckets.
//
// This package is not implemented yet.
package backupstore
