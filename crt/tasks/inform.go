package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

// Inform lists the tasks and then watches them, in one ordered stream of
// their changes, until ctx is done or the watch cannot go on (see
// opstask.Informer); opstask's controller keeps the only copy. It holds no
// object itself: the list is read a page at a time, and a finished task
// that is neither held, being deleted nor in a cleanup is decoded only as
// far as opstask.FinishedTask and delivered with SetFinished, so that the
// finished tasks retained cost a few hundred bytes each, in the list's
// garbage as in the controller's copy. Every other task, and every task a
// watch event brings, is decoded whole (kubestore.Decode) and delivered with
// Set. The manager's informer on the kind is not used: it would hold every
// task whole.
func (s *taskStore) Inform(ctx context.Context, e opstask.TaskEvents) error {
	rc, resource, err := s.restClient()
	if err != nil {
		return err
	}
	rv, err := s.listInto(ctx, rc, resource, e)
	if err != nil {
		return err
	}
	e.Synced()
	for {
		if rv, err = s.watchFrom(ctx, rc, resource, rv, e); err != nil {
			return err
		}
	}
}

// restClient returns a client of the kind's REST path and its resource
// name, over the manager's HTTP client.
func (s *taskStore) restClient() (rest.Interface, string, error) {
	m, err := s.mapper.RESTMapping(s.gvk.GroupKind(), s.gvk.Version)
	if err != nil {
		return nil, "", fmt.Errorf("crt: resource of %s: %w", s.gvk.Kind, err)
	}
	rc, err := apiutil.RESTClientForGVK(s.gvk, true, true, s.config, serializer.NewCodecFactory(s.scheme), s.httpClient)
	if err != nil {
		return nil, "", fmt.Errorf("crt: REST client for %s: %w", s.gvk.Kind, err)
	}
	return rc, m.Resource.Resource, nil
}

func (s *taskStore) request(rc rest.Interface, resource string) *rest.Request {
	return rc.Get().NamespaceIfScoped(s.opts.Namespace, s.opts.Namespace != "").Resource(resource).
		SetHeader("Accept", "application/json")
}

// wireTask is what a page of the list is first decoded into: what says
// whether the task is finished and idle, and its FinishedTask. encoding/json
// skips the rest (managed fields, the rest of the status) without keeping
// it. The spec's members stay raw: the target field is named by Options,
// and a value that does not decode sends the task to kubestore.Decode,
// which reports it.
type wireTask struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
		// The times stay strings: metav1.Time's decoding costs as much
		// as the rest of the task.
		CreationTimestamp string   `json:"creationTimestamp"`
		DeletionTimestamp string   `json:"deletionTimestamp"`
		Finalizers        []string `json:"finalizers"`
	} `json:"metadata"`
	Spec   map[string]rawRef `json:"spec"`
	Status struct {
		State              opstask.TaskState `json:"state"`
		LastTransitionTime string            `json:"lastTransitionTime"`
		LastOperation      *struct {
			Type  opstask.LastOperationType  `json:"type"`
			State opstask.LastOperationState `json:"state"`
		} `json:"lastOperation"`
	} `json:"status"`
}

// finished returns w as a FinishedTask when it is finished and neither held,
// being deleted nor in a cleanup, and its spec decodes; ok is false
// otherwise, and the task is decoded whole.
func (w *wireTask) finished(targetField string) (f opstask.FinishedTask, ok bool) {
	m, st := &w.Metadata, &w.Status
	if !st.State.Finished() || m.DeletionTimestamp != "" || slices.Contains(m.Finalizers, kubestore.Finalizer) ||
		(st.LastOperation != nil && st.LastOperation.Type == opstask.LastOperationTypeCleanup && st.LastOperation.State == opstask.LastOperationStateInProgress) {
		return f, false
	}
	f = opstask.FinishedTask{Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, State: st.State}
	var err error
	if f.CreationTimestamp, err = parseTime(m.CreationTimestamp); err != nil {
		return f, false
	}
	if f.FinishedAt, err = parseTime(st.LastTransitionTime); err != nil {
		return f, false
	}
	if raw, found := w.Spec["config"]; found && !isNull(raw) {
		var config map[string]rawRef
		if json.Unmarshal(raw, &config) != nil {
			return f, false
		}
		for k, v := range config {
			if isNull(v) {
				continue // kubestore.Decode leaves it out
			}
			if f.Kind != "" {
				f.Kind = "" // several members: no kind, as Task.Kind says
				break
			}
			f.Kind = k
		}
	}
	if raw, found := w.Spec["ttlSecondsAfterFinished"]; found && !isNull(raw) {
		ttl, err := strconv.ParseInt(string(raw), 10, 32)
		if err != nil {
			return f, false // not an integer as the API server writes one
		}
		n := int32(ttl)
		f.TTLSecondsAfterFinished = &n
	}
	if raw, found := w.Spec[targetField]; targetField != "" && found && !isNull(raw) {
		if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && !bytes.ContainsAny(raw[1:n-1], `"\`) {
			f.Target = string(raw[1 : n-1])
		} else if json.Unmarshal(raw, &f.Target) != nil {
			return f, false
		}
	}
	return f, true
}

// rawRef is a JSON value where it is in the page being decoded, not
// copied: used only before the page's buffer is read into again.
type rawRef []byte

func (r *rawRef) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// parseTime parses a metav1.Time as it is written (RFC 3339, to the
// second); "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339, s)
}

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// informPageSize bounds the tasks of one page of Inform's list: larger
// than taskPageSize, since a page is read into one buffer and decoded only
// as far as FinishedTask, so that a store that retains 50,000 finished
// tasks lists them in 25 requests (one page is some 2.5 MB of JSON).
const informPageSize = 2000

// listInto delivers every task to e, a page of informPageSize at a time
// read into one reused buffer, and returns the list's resourceVersion, from
// which the watch starts.
func (s *taskStore) listInto(ctx context.Context, rc rest.Interface, resource string, e opstask.TaskEvents) (string, error) {
	var buf bytes.Buffer
	var page struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []wireTask `json:"items"`
	}
	for cont := ""; ; {
		req := s.request(rc, resource).Param("limit", strconv.Itoa(informPageSize))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		if err := readAll(ctx, req, &buf); err != nil {
			return "", fmt.Errorf("crt: list %s: %w", s.gvk.Kind, translateTaskError(err))
		}
		page.Metadata.ResourceVersion, page.Metadata.Continue = "", ""
		clear(page.Items) // json decodes into the elements it reuses
		page.Items = page.Items[:0]
		if err := json.Unmarshal(buf.Bytes(), &page); err != nil {
			// A value the wire form cannot take: decode the page whole,
			// and let kubestore.Decode say what is wrong with which task.
			page.Items = nil
		}
		var whole []int
		for i := range page.Items {
			if f, ok := page.Items[i].finished(s.opts.TargetField); ok {
				e.SetFinished(f)
			} else {
				whole = append(whole, i)
			}
		}
		if page.Items == nil || len(whole) > 0 {
			if err := s.decodeWhole(buf.Bytes(), whole, page.Items == nil, e); err != nil {
				return "", err
			}
		}
		if cont = page.Metadata.Continue; cont == "" {
			return page.Metadata.ResourceVersion, nil
		}
	}
}

// decodeWhole delivers the items of the page of list data at the indexes
// (all of them when all is set) decoded whole.
func (s *taskStore) decodeWhole(data []byte, indexes []int, all bool, e opstask.TaskEvents) error {
	var raw struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("crt: list %s: decode: %w", s.gvk.Kind, err)
	}
	if all {
		indexes = make([]int, len(raw.Items))
		for i := range indexes {
			indexes[i] = i
		}
	}
	for _, i := range indexes {
		if _, err := s.deliver(raw.Items[i], e); err != nil {
			return err
		}
	}
	return nil
}

// deliver decodes one task and delivers it with Set, or to Invalid, and
// returns its resourceVersion. An object that is not JSON fails.
func (s *taskStore) deliver(raw []byte, e opstask.TaskEvents) (rv string, err error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return "", fmt.Errorf("crt: decode %s: %w", s.gvk.Kind, err)
	}
	u.SetGroupVersionKind(s.gvk)
	t, err := kubestore.Decode(u, s.opts.TargetField)
	if err != nil {
		e.Invalid(u.GetNamespace(), u.GetName(), err)
	} else {
		e.Set(t)
	}
	return u.GetResourceVersion(), nil
}

// readAll reads the response to req into buf, reset first.
func readAll(ctx context.Context, req *rest.Request, buf *bytes.Buffer) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	buf.Reset()
	_, err = buf.ReadFrom(body)
	return err
}

// watchFrom delivers the changes after resourceVersion rv until the watch
// ends, and returns the resourceVersion to watch from next. An error ends
// Inform: the controller informs again from scratch (a watch whose
// resourceVersion is too old, 410 Gone, needs a new list).
func (s *taskStore) watchFrom(ctx context.Context, rc rest.Interface, resource, rv string, e opstask.TaskEvents) (string, error) {
	body, err := s.request(rc, resource).Param("watch", "true").Param("resourceVersion", rv).
		Param("allowWatchBookmarks", "true").Stream(ctx)
	if err != nil {
		return rv, fmt.Errorf("crt: watch %s: %w", s.gvk.Kind, err)
	}
	defer func() { _ = body.Close() }()
	dec := json.NewDecoder(body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return rv, ctx.Err()
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return rv, nil // the API server ended the watch: watch on
			}
			return rv, fmt.Errorf("crt: watch %s: %w", s.gvk.Kind, err)
		}
		switch ev.Type {
		case "ADDED", "MODIFIED":
			v, err := s.deliver(ev.Object, e)
			if err != nil {
				return rv, err
			}
			rv = v
		case "DELETED":
			var o struct {
				Metadata struct {
					Name            string `json:"name"`
					Namespace       string `json:"namespace"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(ev.Object, &o); err != nil {
				return rv, fmt.Errorf("crt: watch %s: deleted object: %w", s.gvk.Kind, err)
			}
			e.Gone(o.Metadata.Namespace, o.Metadata.Name)
			rv = o.Metadata.ResourceVersion
		case "BOOKMARK":
			var o struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if json.Unmarshal(ev.Object, &o) == nil && o.Metadata.ResourceVersion != "" {
				rv = o.Metadata.ResourceVersion
			}
		case "ERROR":
			var st metav1.Status
			if err := json.Unmarshal(ev.Object, &st); err != nil {
				return rv, fmt.Errorf("crt: watch %s: error event: %w", s.gvk.Kind, err)
			}
			if st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone {
				return rv, fmt.Errorf("crt: watch %s from resourceVersion %s: %w", s.gvk.Kind, rv, apierrors.FromObject(&st))
			}
			return rv, fmt.Errorf("crt: watch %s: %w", s.gvk.Kind, apierrors.FromObject(&st))
		}
	}
}
