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

// RelatedRecorder is a Recorder that can also name the object an event is
// about besides the one it is recorded on: the "related" object of the
// events.k8s.io API (the claim of an event recorded on its owner). The
// packages use EventRelated when the recorder has it. An events.k8s.io
// recorder needs it: it folds events of one object, reason and action into
// one series whatever their messages, so the events about two claims of one
// owner would show as one without it.
type RelatedRecorder interface {
	Recorder
	EventRelated(regarding, related runtime.Object, eventtype, reason, message string)
}

// Record records an event on regarding through r, naming related when r is
// a RelatedRecorder and related is not nil.
func Record(r Recorder, regarding, related runtime.Object, eventtype, reason, message string) {
	if rr, ok := r.(RelatedRecorder); ok && related != nil {
		rr.EventRelated(regarding, related, eventtype, reason, message)
		return
	}
	r.Event(regarding, eventtype, reason, message)
}
