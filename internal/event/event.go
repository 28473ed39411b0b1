// Package event holds the one event recorder shape that groundskeeper's
// packages take. lifecycle and subreconcile export it under their own names
// (lifecycle.EventRecorder, subreconcile.EventRecorder, and EventFunc) as
// aliases, so one recorder serves both.
package event

import "k8s.io/apimachinery/pkg/runtime"

// Recorder is the part of client-go's record.EventRecorder that
// groundskeeper's packages use; a record.EventRecorder satisfies it as is.
// Wrap anything else (for example a k8s.io/client-go/tools/events recorder)
// in a Func.
type Recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// Func adapts a function to a Recorder.
type Func func(object runtime.Object, eventtype, reason, message string)

// Event calls f.
func (f Func) Event(object runtime.Object, eventtype, reason, message string) {
	f(object, eventtype, reason, message)
}

var _ Recorder = Func(nil)
