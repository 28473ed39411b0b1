package backupstore

import (
	"errors"

	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
)

// notFound reports whether err says that an object (or its bucket) does not
// exist. It trusts gcerrors.Code except for S3: gocloud's s3blob reports
// every operation error whose text contains "301" as NotFound, to catch
// region redirects, and a request ID or a message may contain those digits.
// An access-denied or server error read as "not found" would mark an object
// as gone that is still there, so for S3 only the service's own not-found
// codes count.
func notFound(err error) bool {
	if gcerrors.Code(err) != gcerrors.NotFound {
		return false
	}
	var oe *smithy.OperationError
	if !errors.As(err, &oe) {
		return true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "NoSuchKey", "NotFound", "NoSuchBucket":
		return true
	}
	return false
}
