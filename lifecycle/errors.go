package lifecycle

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Sentinel errors. Test for them with errors.Is; the errors returned by this
// package wrap them with the object, field and value concerned.
var (
	// ErrInvalidPolicy: a policy name or a whenDeleted/whenScaled value is not
	// one this package knows. Unknown values are rejected, never read as
	// Retain or Delete.
	ErrInvalidPolicy = errclass.Terminal("lifecycle: invalid policy")
	// ErrInvalidConfig: New was given a Config it cannot work with. The
	// error names the field and its value.
	ErrInvalidConfig = errclass.Terminal("lifecycle: invalid configuration")
	// ErrInvalidInput: a required field is missing (an owner without a UID,
	// a claim without a name) or an annotation value cannot be parsed.
	ErrInvalidInput = errclass.Terminal("lifecycle: invalid input")
	// ErrConflictingController: another controller's controller reference is
	// on the claim. The retention policy is not applied to that claim; only
	// references to our owner and pod were removed. Unwrap with errors.As to
	// a *ConflictError to see the other controller.
	ErrConflictingController = errclass.Terminal("lifecycle: claim has a conflicting controller")
	// ErrStaleOwnerReference: the claim refers to an earlier object with the
	// owner's or pod's name (another UID). The claim is left to the garbage
	// collector and not touched.
	ErrStaleOwnerReference = errclass.Retryable("lifecycle: claim has a stale owner reference")
	// ErrTooManyConflicts: the claim kept changing between our read and our
	// write; the caller should requeue.
	ErrTooManyConflicts = errclass.Retryable("lifecycle: claim kept changing, giving up for now")
)

// PolicyError reports a rejected policy value. It unwraps to
// ErrInvalidPolicy.
type PolicyError struct {
	// Field is the field that holds the value: "policy", "whenDeleted" or
	// "whenScaled".
	Field string
	// Value is the rejected value, as given.
	Value string
}

func (e *PolicyError) Error() string {
	var want string
	switch e.Field {
	case "whenDeleted", "whenScaled":
		want = `must be "Retain" or "Delete"`
	default:
		want = `must be one of "Retain", "DeleteOnOwnerDeletionOnly", "DeleteOnScaledownOnly", "DeleteOnScaledownAndOwnerDeletion" (or the KEP-1847 names with "StatefulSet")`
	}
	return fmt.Sprintf("%v: %s = %q: %s", ErrInvalidPolicy, e.Field, e.Value, want)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*PolicyError) Terminal() bool { return true }

func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// ConflictError reports that a claim is controlled by someone else. It
// unwraps to ErrConflictingController.
type ConflictError struct {
	// Claim is "namespace/name" of the claim.
	Claim string
	// Controller is the other controller's reference found on the claim.
	Controller metav1.OwnerReference
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: claim %s is controlled by %s %s (uid %s); its retention policy is not applied",
		ErrConflictingController, e.Claim, e.Controller.Kind, e.Controller.Name, e.Controller.UID)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*ConflictError) Terminal() bool { return true }

func (e *ConflictError) Unwrap() error { return ErrConflictingController }
