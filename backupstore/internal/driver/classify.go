package driver

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"gocloud.dev/gcerrors"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrOutsidePrefix marks a listed key that is not under the prefix: it is
// never sent to the store.
var ErrOutsidePrefix = errors.New("key is not under the prefix; refused")

// IsTransient reports whether err may go away if the request is repeated.
// Errors of the context are not transient: the caller gave up. The
// registered providers judge their SDKs' errors first.
// ErrRetained is backupstore.ErrRetained, declared here for the drivers
// that classify a deletion refused by Object Lock.
var ErrRetained = errclass.Retryable("backupstore: retained by object lock")

func IsTransient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrOutsidePrefix) || errors.Is(err, ErrRetained) {
		return false
	}
	for _, p := range Providers() {
		if transient, known := p.Transient(err); known {
			return transient
		}
	}
	type coder interface{ HTTPStatusCode() int }
	var c coder
	if errors.As(err, &c) {
		return TransientStatus(c.HTTPStatusCode())
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.InvalidArgument, gcerrors.PermissionDenied, gcerrors.FailedPrecondition,
		gcerrors.Unimplemented, gcerrors.AlreadyExists, gcerrors.Canceled:
		return false
	}
	// Unknown errors are retried: deletes are idempotent, and tries are
	// bounded.
	return true
}

// IsExists reports whether err is a conditional write's refusal to write
// over an object that exists (blob.WriterOptions.IfNotExist, gocloud's
// FailedPrecondition; a Putter's HTTP 412 Precondition Failed).
func IsExists(err error) bool {
	if err == nil {
		return false
	}
	type coder interface{ HTTPStatusCode() int }
	var c coder
	if errors.As(err, &c) && c.HTTPStatusCode() == 412 {
		return true
	}
	return gcerrors.Code(err) == gcerrors.FailedPrecondition
}

// IsNotFound reports whether err says that an object (or its bucket) does
// not exist. It trusts gcerrors.Code unless a provider knows better: on
// S3, gocloud's s3blob reports every operation error whose text contains
// "301" as NotFound, to catch region redirects, and a request ID or a
// message may contain those digits. An access-denied or server error read
// as "not found" would mark an object as gone that is still there.
func IsNotFound(err error) bool {
	if gcerrors.Code(err) != gcerrors.NotFound {
		return false
	}
	for _, p := range Providers() {
		if notFound, known := p.NotFound(err); known {
			return notFound
		}
	}
	return true
}
