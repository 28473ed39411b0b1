package rbactest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Request is one API request as RBAC authorizes it.
type Request struct {
	// Verb is the RBAC verb: get, list, watch, create, update, patch,
	// delete or deletecollection for a resource request; the lower-case
	// HTTP method for a non-resource one.
	Verb string
	// Group is the API group, empty for the core group.
	Group string
	// Resource is the resource, with "/subresource" if any ("pods/status");
	// empty for a non-resource request.
	Resource string
	// Namespace is empty for a cluster-scoped resource.
	Namespace string
	// Name is empty for list, watch (unless a field selector picks one
	// name), create and deletecollection.
	Name string
	// Path is the URL path of a non-resource request, such as /version;
	// empty for a resource request.
	Path string
}

// String reads like "get leases.coordination.k8s.io "lock" in namespace "ns"".
func (r Request) String() string {
	if r.Path != "" {
		return r.Verb + " " + r.Path
	}
	s := r.Verb + " " + schema.GroupResource{Group: r.Group, Resource: r.Resource}.String()
	if r.Name != "" {
		s += fmt.Sprintf(" %q", r.Name)
	}
	if r.Namespace != "" {
		s += fmt.Sprintf(" in namespace %q", r.Namespace)
	}
	return s
}

// Recorder records the requests made through the configs it wraps. The
// zero value is ready to use, and safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	reqs []Request
}

// Wrap returns a copy of cfg whose clients record their requests in r
// before sending them. cfg itself is left as it was.
func (r *Recorder) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			reqs := parseRequest(req.Method, req.URL)
			r.mu.Lock()
			r.reqs = append(r.reqs, reqs...)
			r.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Requests returns the requests recorded so far, in the order they were
// sent.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// parseRequest maps an HTTP request to the request RBAC authorizes, the way
// the API server's RequestInfoFactory does; a watch-list is also a list
// (see the package doc). Proxy and connect requests are not mapped: no
// example makes them.
func parseRequest(method string, u *url.URL) []Request {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var r Request
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.Group, parts = parts[1], parts[3:]
	default:
		return []Request{{Verb: strings.ToLower(method), Path: "/" + strings.TrimLeft(u.Path, "/")}}
	}
	query := u.Query()
	legacyWatch := parts[0] == "watch" && len(parts) > 1
	if legacyWatch {
		parts = parts[1:]
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		r.Namespace = parts[1]
		// The namespace's own subresources belong to the namespace.
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	r.Resource = parts[0]
	if len(parts) > 1 {
		r.Name = parts[1]
	}
	if len(parts) > 2 {
		r.Resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case legacyWatch:
			r.Verb = "watch"
		case r.Name != "":
			r.Verb = "get"
		case query.Has("watch") && !slices.Contains([]string{"false", "0"}, strings.ToLower(query.Get("watch"))):
			r.Verb = "watch"
		default:
			r.Verb = "list"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
		if r.Name == "" {
			r.Verb = "deletecollection"
		}
	default:
		r.Verb = strings.ToLower(method)
	}
	if (r.Verb == "list" || r.Verb == "watch") && !legacyWatch {
		// A field selector on metadata.name makes it a request for that
		// name, which resourceNames can allow.
		for _, s := range strings.Split(query.Get("fieldSelector"), ",") {
			s = strings.Replace(s, "==", "=", 1)
			if name, ok := strings.CutPrefix(s, "metadata.name="); ok {
				r.Name = name
			}
		}
	}
	if r.Verb == "watch" && query.Get("sendInitialEvents") == "true" {
		l := r
		l.Verb = "list"
		return []Request{r, l}
	}
	return []Request{r}
}
