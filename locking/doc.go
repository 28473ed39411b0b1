// Package locking is the FoundationDB operator's global operator lock: the
// value tuple{lockID, start, end} stored under a configurable prefix, a
// default duration of ten minutes, extension, take-over of expired locks, a
// deny list with explicit allow, and a disable switch. The algorithm is
// written once against a small transactional key-value backend; backends live
// in sub-packages.
//
// This package is not implemented yet.
package locking
