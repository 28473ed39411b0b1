// Package lifecycle owns the life of persistent volume claims that an
// operator creates for its pods: the KEP-1847 delete policies applied to
// claims of any owner kind, owner-reference computation, condemned pods on
// scale-down, waiting for a terminating claim before reuse, unmount tracking
// annotations and TTL-based claim collection.
//
// This package is not implemented yet.
package lifecycle
