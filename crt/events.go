package crt

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Events adapts an events.EventRecorder of the events.k8s.io API
// (mgr.GetEventRecorder(name)) to the recorder groundskeeper's packages
// take. The older Event call they make has no action: the reason stands for
// it. The packages name the object an event is about besides the one it is
// recorded on (a claim, for an event on its owner) as the related object,
// so that the recorder does not fold the events about two claims of one
// owner into one series. (mgr.GetEventRecorderFor's record.EventRecorder
// needs no adapter.)
func Events(r events.EventRecorder) lifecycle.EventRecorder { return recorder{r} }

type recorder struct{ r events.EventRecorder }

func (e recorder) Event(object runtime.Object, eventtype, reason, message string) {
	e.r.Eventf(object, nil, eventtype, reason, reason, "%s", message)
}

func (e recorder) EventRelated(regarding, related runtime.Object, eventtype, reason, message string) {
	e.r.Eventf(regarding, related, eventtype, reason, reason, "%s", message)
}
