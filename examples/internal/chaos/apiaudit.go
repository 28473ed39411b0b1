package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DeleteRequest is one delete the API server carried out, as its audit log
// records it (testenv.IsolatedKubernetes.AuditLog). Unlike a [DeleteAudit],
// which sees what a watch delivers, the audit log misses no deletion while
// watches are down: it is the API server's own record of every delete
// request.
type DeleteRequest struct {
	// Resource is the resource's plural name ("persistentvolumeclaims"),
	// APIGroup its group ("" for the core group).
	Resource, APIGroup string
	Namespace, Name    string
	// UID is the deleted object's, from the response.
	UID types.UID
	// Received and Completed bound when the deletion took effect: the
	// object was removed (or marked for deletion, when it has finalizers)
	// at an instant between them.
	Received, Completed time.Time
	// User is who sent the request, UserAgent the client it said it was:
	// kube-controller-manager's controllers share one user in testenv and
	// end their user agents with their names ("/generic-garbage-collector").
	User, UserAgent string
	// Object is the response object (the object as it was deleted or
	// marked), as JSON.
	Object json.RawMessage
	// Uncertain means the request's outcome is unknown: the API server
	// answered with a server error (5xx: say, its client was cut off and
	// the request's context ended while etcd may already have deleted the
	// object), or it recorded the request's receipt but never its
	// completion (it was killed). The object may or may not have been
	// deleted; UID is set only if the request named one, and Completed is
	// zero when no completion was recorded. A refused request (4xx) is
	// certain to have deleted nothing and is not returned.
	Uncertain bool
}

// auditEvent is the part of an audit.k8s.io/v1 Event a DeleteRequest needs.
type auditEvent struct {
	AuditID   string                    `json:"auditID"`
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	UserAgent string                    `json:"userAgent"`
	ObjectRef *struct {
		Resource, Namespace, Name, APIGroup string
		UID                                 types.UID
	} `json:"objectRef"`
	ResponseStatus *struct{ Code int } `json:"responseStatus"`
	ResponseObject json.RawMessage     `json:"responseObject"`
	Received       time.Time           `json:"requestReceivedTimestamp"`
	Completed      time.Time           `json:"stageTimestamp"`
}

type objectMeta struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name, Namespace string
		UID             types.UID
	} `json:"metadata"`
	Details *struct { // a Status answering a delete
		Name string
		UID  types.UID
	} `json:"details"`
	Items []json.RawMessage `json:"items"`
}

// ReadDeleteRequests reads the delete and deletecollection requests from an
// audit log written at level RequestResponse (with the RequestReceived and
// ResponseComplete stages), and from the files it was rotated into (path's
// name with a timestamp before the extension), in the order completed:
// those that succeeded, and those whose outcome is unknown (Uncertain),
// which come last. A deletecollection that succeeded gives one
// DeleteRequest per object its response lists.
func ReadDeleteRequests(path string) ([]DeleteRequest, error) {
	ext := filepath.Ext(path)
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, err
	}
	var out []DeleteRequest
	received := map[string]DeleteRequest{} // by audit ID, until completed
	for _, p := range append(rotated, path) {
		reqs, err := readDeleteRequests(p, received)
		if err != nil {
			return nil, err
		}
		out = append(out, reqs...)
	}
	slices.SortStableFunc(out, func(a, b DeleteRequest) int { return a.Completed.Compare(b.Completed) })
	var never []DeleteRequest
	for _, r := range received {
		never = append(never, r)
	}
	slices.SortStableFunc(never, func(a, b DeleteRequest) int { return a.Received.Compare(b.Received) })
	return append(out, never...), nil
}

// readDeleteRequests reads one file. received holds the requests whose
// receipt was read and whose completion was not yet, by audit ID, across
// files.
func readDeleteRequests(path string, received map[string]DeleteRequest) ([]DeleteRequest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []DeleteRequest
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// A kill can leave a torn last line.
			if !sc.Scan() {
				break
			}
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if (ev.Verb != "delete" && ev.Verb != "deletecollection") || ev.ObjectRef == nil {
			continue
		}
		base := DeleteRequest{
			Resource: ev.ObjectRef.Resource, APIGroup: ev.ObjectRef.APIGroup, Namespace: ev.ObjectRef.Namespace,
			Name: ev.ObjectRef.Name, UID: ev.ObjectRef.UID,
			Received: ev.Received, Completed: ev.Completed, User: ev.User.Username, UserAgent: ev.UserAgent,
		}
		switch ev.Stage {
		case "RequestReceived":
			base.Completed, base.Uncertain = time.Time{}, true
			received[ev.AuditID] = base
			continue
		case "ResponseComplete", "Panic":
			delete(received, ev.AuditID)
		default:
			continue
		}
		status := 0
		if ev.ResponseStatus != nil {
			status = ev.ResponseStatus.Code
		}
		switch status / 100 {
		case 2:
		case 4:
			continue // refused: nothing deleted
		default:
			// A server error, a panic or no status: unknown.
			base.Uncertain = true
			out = append(out, base)
			continue
		}
		var resp objectMeta
		if len(ev.ResponseObject) > 0 {
			if err := json.Unmarshal(ev.ResponseObject, &resp); err != nil {
				return nil, fmt.Errorf("%s:%d: responseObject: %w", path, line, err)
			}
		}
		if ev.Verb == "deletecollection" {
			for _, item := range resp.Items {
				var m objectMeta
				if err := json.Unmarshal(item, &m); err != nil {
					return nil, fmt.Errorf("%s:%d: responseObject item: %w", path, line, err)
				}
				r := base
				r.Name, r.Namespace, r.UID, r.Object = m.Metadata.Name, m.Metadata.Namespace, m.Metadata.UID, item
				out = append(out, r)
			}
			continue
		}
		switch {
		case resp.Metadata.UID != "":
			base.UID = resp.Metadata.UID
		case resp.Details != nil && resp.Details.UID != "":
			base.UID = resp.Details.UID
		}
		base.Object = ev.ResponseObject
		out = append(out, base)
	}
	return out, sc.Err()
}
