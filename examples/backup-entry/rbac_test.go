package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// request is one API request as RBAC sees it.
type request struct {
	verb, group, resource, namespace, name string
}

func (r request) String() string {
	return fmt.Sprintf("%s %s/%s ns=%q name=%q", r.verb, r.group, r.resource, r.namespace, r.name)
}

// requestLog records every request made through a rest.Config.
type requestLog struct {
	mu   sync.Mutex
	reqs []request
}

// wrap returns a copy of cfg whose clients record their requests in l.
func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if r, ok := parseRequest(req); ok {
				l.mu.Lock()
				l.reqs = append(l.reqs, r)
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

func (l *requestLog) requests() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// parseRequest maps a resource request's method and path to RBAC's verb,
// group, resource (with "/subresource"), namespace and name.
func parseRequest(req *http.Request) (request, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var r request
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.group, parts = parts[1], parts[3:]
	default:
		return r, false // discovery, health
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	r.resource = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			r.verb = "watch"
		case r.name == "":
			r.verb = "list"
		default:
			r.verb = "get"
		}
	case http.MethodPost:
		r.verb = "create"
	case http.MethodPut:
		r.verb = "update"
	case http.MethodPatch:
		r.verb = "patch"
	case http.MethodDelete:
		r.verb = "delete"
	default:
		return r, false
	}
	return r, true
}

// grant is one rule of deploy/rbac.yaml; namespace is empty for a
// ClusterRole's.
type grant struct {
	namespace string
	rule      rbacv1.PolicyRule
}

func (g grant) allows(r request, namespaces map[string]string) bool {
	if g.namespace != "" && namespaces[g.namespace] != r.namespace {
		return false
	}
	return slices.Contains(g.rule.APIGroups, r.group) && slices.Contains(g.rule.Resources, r.resource) &&
		slices.Contains(g.rule.Verbs, r.verb) &&
		(len(g.rule.ResourceNames) == 0 || slices.Contains(g.rule.ResourceNames, r.name))
}

func loadGrants(t *testing.T) []grant {
	t.Helper()
	f, err := os.Open(filepath.Join("deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []grant
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			out = append(out, grant{namespace: u.GetNamespace(), rule: rule})
		}
	}
}

// checkRBAC fails the test for a request deploy/rbac.yaml does not allow,
// and for a verb it grants that no request used (except those in unused,
// with the reason). namespaces maps the manifests' namespaces to the test's.
func checkRBAC(t *testing.T, reqs []request, namespaces map[string]string, unused map[string]string) {
	t.Helper()
	grants := loadGrants(t)
	used := map[string]bool{}
	seen := map[string]bool{}
	for _, r := range reqs {
		i := slices.IndexFunc(grants, func(g grant) bool { return g.allows(r, namespaces) })
		if i < 0 {
			if !seen[r.String()] {
				t.Errorf("deploy/rbac.yaml does not allow the request %s", r)
			}
			seen[r.String()] = true
			continue
		}
		used[fmt.Sprintf("%s %s/%s", r.verb, r.group, r.resource)] = true
	}
	for _, g := range grants {
		for _, res := range g.rule.Resources {
			for _, v := range g.rule.Verbs {
				for _, grp := range g.rule.APIGroups {
					k := fmt.Sprintf("%s %s/%s", v, grp, res)
					if !used[k] && unused[k] == "" {
						t.Errorf("deploy/rbac.yaml grants %q, which the controller never used", k)
					}
				}
			}
		}
	}
	t.Logf("%d API requests checked against deploy/rbac.yaml", len(reqs))
}
