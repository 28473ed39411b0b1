package crt

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Events adapts an events.EventRecorder of the events.k8s.io API
// (mgr.GetEventRecorder(name)) to the recorder groundskeeper's packages
// take. The older Event call they make has no action: the reason stands for
// it. (mgr.GetEventRecorderFor's record.EventRecorder needs no adapter.)
func Events(r events.EventRecorder) lifecycle.EventRecorder {
	return lifecycle.EventFunc(func(object runtime.Object, eventtype, reason, message string) {
		r.Eventf(object, nil, eventtype, reason, reason, "%s", message)
	})
}
