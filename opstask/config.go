package opstask

import (
	"errors"
	"fmt"
	"strings"

	kjson "sigs.k8s.io/json"
)

// DecodeConfig decodes the spec.config member of a task of kind into a T,
// the operator's config type for that kind, as an executor, a precondition
// or Handler.Timeout and Handler.DuplicateKey need it. The decoding is strict, as
// the API server's: field names match case-sensitively, and an unknown or
// repeated field is an error, so a config written for another version of
// the type is refused rather than half read.
//
// A task without the member kind, or whose member does not decode, gets an
// error wrapping ErrInvalidSpec with code InvalidSpec (see WithCode) that
// names the task, the kind and the field: a precondition returning it
// rejects the task, an executor fails it.
func DecodeConfig[T any](t *Task, kind string) (*T, error) {
	got, raw, err := t.Spec.Member()
	if err != nil {
		return nil, WithCode(CodeInvalidSpec, fmt.Errorf("task %s of kind %s: %w", t.Key(), kind, err))
	}
	if got != kind {
		return nil, WithCode(CodeInvalidSpec, fmt.Errorf("%w: task %s: spec.config.%s is set, want spec.config.%s", ErrInvalidSpec, t.Key(), got, kind))
	}
	var v T
	strict, err := kjson.UnmarshalStrict(raw, &v, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err == nil && len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		err = errors.New(strings.Join(msgs, "; "))
	}
	if err != nil {
		return nil, WithCode(CodeInvalidSpec, fmt.Errorf("%w: task %s: spec.config.%s: %v", ErrInvalidSpec, t.Key(), kind, err))
	}
	return &v, nil
}
