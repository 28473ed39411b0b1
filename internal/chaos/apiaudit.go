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
	// User is who sent the request.
	User string
	// Object is the response object (the object as it was deleted or
	// marked), as JSON.
	Object json.RawMessage
}

// auditEvent is the part of an audit.k8s.io/v1 Event a DeleteRequest needs.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
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

// ReadDeleteRequests reads the successful delete and deletecollection
// requests from an audit log written at level RequestResponse, and from the
// files it was rotated into (path's name with a timestamp before the
// extension), in the order completed. A deletecollection gives one
// DeleteRequest per object its response lists.
func ReadDeleteRequests(path string) ([]DeleteRequest, error) {
	ext := filepath.Ext(path)
	rotated, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, err
	}
	var out []DeleteRequest
	for _, p := range append(rotated, path) {
		reqs, err := readDeleteRequests(p)
		if err != nil {
			return nil, err
		}
		out = append(out, reqs...)
	}
	slices.SortStableFunc(out, func(a, b DeleteRequest) int { return a.Completed.Compare(b.Completed) })
	return out, nil
}

func readDeleteRequests(path string) ([]DeleteRequest, error) {
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
		if ev.Stage != "ResponseComplete" || (ev.Verb != "delete" && ev.Verb != "deletecollection") ||
			ev.ObjectRef == nil || ev.ResponseStatus == nil || ev.ResponseStatus.Code/100 != 2 {
			continue
		}
		base := DeleteRequest{
			Resource: ev.ObjectRef.Resource, APIGroup: ev.ObjectRef.APIGroup, Namespace: ev.ObjectRef.Namespace,
			Name: ev.ObjectRef.Name, UID: ev.ObjectRef.UID,
			Received: ev.Received, Completed: ev.Completed, User: ev.User.Username,
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
