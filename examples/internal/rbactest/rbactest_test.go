package rbactest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name, method, url string
		want              []Request
	}{
		{"get of a core resource in a namespace", "GET", "/api/v1/namespaces/ns/pods/p",
			[]Request{{Verb: "get", Resource: "pods", Namespace: "ns", Name: "p"}}},
		{"list of a core resource in a namespace", "GET", "/api/v1/namespaces/ns/pods?limit=500",
			[]Request{{Verb: "list", Resource: "pods", Namespace: "ns"}}},
		{"list of a core resource in all namespaces", "GET", "/api/v1/pods",
			[]Request{{Verb: "list", Resource: "pods"}}},
		{"get of a cluster-scoped core resource", "GET", "/api/v1/nodes/n1",
			[]Request{{Verb: "get", Resource: "nodes", Name: "n1"}}},
		{"get of a namespace is in that namespace", "GET", "/api/v1/namespaces/ns",
			[]Request{{Verb: "get", Resource: "namespaces", Namespace: "ns", Name: "ns"}}},
		{"list of namespaces", "GET", "/api/v1/namespaces",
			[]Request{{Verb: "list", Resource: "namespaces"}}},
		{"update of a namespace's status", "PUT", "/api/v1/namespaces/ns/status",
			[]Request{{Verb: "update", Resource: "namespaces/status", Namespace: "ns", Name: "ns"}}},
		{"create of a grouped resource in a namespace", "POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
			[]Request{{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns"}}},
		{"update of a cluster-scoped grouped resource", "PUT", "/apis/backup.example.io/v1/backupentries/e1",
			[]Request{{Verb: "update", Group: "backup.example.io", Resource: "backupentries", Name: "e1"}}},
		{"update of a status subresource", "PUT", "/apis/backup.example.io/v1/backupentries/e1/status",
			[]Request{{Verb: "update", Group: "backup.example.io", Resource: "backupentries/status", Name: "e1"}}},
		{"patch of a scale subresource in a namespace", "PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/s/scale",
			[]Request{{Verb: "patch", Group: "apps", Resource: "statefulsets/scale", Namespace: "ns", Name: "s"}}},
		{"delete", "DELETE", "/api/v1/namespaces/ns/persistentvolumeclaims/data-0",
			[]Request{{Verb: "delete", Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data-0"}}},
		{"delete without a name is deletecollection", "DELETE", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db",
			[]Request{{Verb: "deletecollection", Resource: "pods", Namespace: "ns"}}},
		{"watch by ?watch=true", "GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5",
			[]Request{{Verb: "watch", Resource: "pods", Namespace: "ns"}}},
		{"watch by ?watch=1", "GET", "/apis/apps/v1/deployments?watch=1",
			[]Request{{Verb: "watch", Group: "apps", Resource: "deployments"}}},
		{"?watch=False lists", "GET", "/api/v1/pods?watch=False",
			[]Request{{Verb: "list", Resource: "pods"}}},
		{"watch by the legacy /watch/ prefix", "GET", "/api/v1/watch/namespaces/ns/pods",
			[]Request{{Verb: "watch", Resource: "pods", Namespace: "ns"}}},
		{"watch of one name by a field selector", "GET", "/api/v1/namespaces/ns/pods?watch=true&fieldSelector=metadata.name%3Dp",
			[]Request{{Verb: "watch", Resource: "pods", Namespace: "ns", Name: "p"}}},
		{"list of one name by a field selector with ==", "GET", "/api/v1/namespaces/ns/pods?fieldSelector=spec.nodeName%3Dn%2Cmetadata.name%3D%3Dp",
			[]Request{{Verb: "list", Resource: "pods", Namespace: "ns", Name: "p"}}},
		{"a watch-list is a list too", "GET", "/apis/g.io/v1/things?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
			[]Request{{Verb: "watch", Group: "g.io", Resource: "things"}, {Verb: "list", Group: "g.io", Resource: "things"}}},
		{"HEAD is get", "HEAD", "/api/v1/namespaces/ns/secrets/s",
			[]Request{{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"}}},
		{"an unknown method is kept, lower-case", "TRACE", "/api/v1/namespaces/ns/pods/p",
			[]Request{{Verb: "trace", Resource: "pods", Namespace: "ns", Name: "p"}}},
		{"core discovery is a non-resource request", "GET", "/api/v1",
			[]Request{{Verb: "get", Path: "/api/v1"}}},
		{"group discovery is a non-resource request", "GET", "/apis/apps/v1",
			[]Request{{Verb: "get", Path: "/apis/apps/v1"}}},
		{"health check is a non-resource request", "GET", "/healthz",
			[]Request{{Verb: "get", Path: "/healthz"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := parseRequest(tc.method, u); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: got %v, want %v", tc.method, tc.url, got, tc.want)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add("GET", "/api/v1/namespaces/ns/pods?watch=true")
	f.Add("DELETE", "/apis/g/v1/namespaces/ns/things")
	f.Add("GET", "/api/v1/watch/namespaces")
	f.Add("PUT", "/api/v1/namespaces/ns/status")
	f.Add("GET", "//api//v1//")
	f.Fuzz(func(t *testing.T, method, rawURL string) {
		u, err := url.Parse(rawURL)
		if err != nil {
			return
		}
		reqs := parseRequest(method, u)
		if len(reqs) == 0 {
			t.Fatalf("%s %s: no request", method, rawURL)
		}
		for _, r := range reqs {
			nonResource := r.Path != ""
			if nonResource && r != (Request{Verb: r.Verb, Path: r.Path}) {
				t.Errorf("%s %s: non-resource request %+v has resource fields", method, rawURL, r)
			}
			if resource := strings.HasPrefix(strings.TrimLeft(u.Path, "/"), "api"); !nonResource && !resource {
				t.Errorf("%s %s: %+v is a resource request", method, rawURL, r)
			}
		}
	})
}

func TestRequestString(t *testing.T) {
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns", Name: "lock"},
			`get leases.coordination.k8s.io "lock" in namespace "ns"`},
		{Request{Verb: "update", Group: "g.io", Resource: "things/status", Name: "t"}, `update things/status.g.io "t"`},
		{Request{Verb: "list", Resource: "pods"}, `list pods`},
		{Request{Verb: "get", Path: "/version"}, `get /version`},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.r, got, tc.want)
		}
	}
}

// The recorder sees the requests of a real client-go clientset, and leaves
// the config it wraps alone.
func TestRecorderWrap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	var rec Recorder
	wrapped := rec.Wrap(cfg)
	if cfg.WrapTransport != nil {
		t.Error("Wrap changed the config it was given")
	}
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(wrapped)
	_, _ = client.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
	_, _ = client.CoordinationV1().Leases("ns").List(ctx, metav1.ListOptions{})
	_ = client.CoreV1().Pods("ns").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_, _ = kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("ns").Get(ctx, "unrecorded", metav1.GetOptions{})
	want := []Request{
		{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"},
		{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns"},
		{Verb: "deletecollection", Resource: "pods", Namespace: "ns"},
	}
	if got := rec.Requests(); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

// A program that reads the kubeconfig is recorded, its requests reach the
// API server with the config's credentials, and a watch streams its events.
func TestRecorderKubeconfig(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	var rec Recorder
	path := rec.Kubeconfig(t, &rest.Config{Host: srv.URL, BearerToken: "admin"})
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" {
		t.Errorf("the kubeconfig has the token %q", cfg.BearerToken)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get through the proxy: %v, want the server's NotFound", err)
	}
	w, err := client.CoreV1().Secrets("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("watch event %+v, want ADDED", ev)
		}
	case <-ctx.Done():
		t.Error("the watch event did not come through the proxy")
	}
	w.Stop()
	want := []Request{
		{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"},
		{Verb: "watch", Resource: "secrets", Namespace: "ns"},
	}
	if got := rec.Requests(); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if want := []string{"Bearer admin", "Bearer admin"}; !slices.Equal(auth, want) {
		t.Errorf("the server saw Authorization %q, want %q", auth, want)
	}
}

const manifest = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: op}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: op}
rules:
  - apiGroups: [g.io]
    resources: [things]
    verbs: [list, watch]
  - apiGroups: [g.io]
    resources: [things/status]
    verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op, namespace: op}
rules:
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [op]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op-events, namespace: default}
rules:
  - apiGroups: [""]
    resources: [events]
    verbs: [create]
`

func TestDecodeRules(t *testing.T) {
	rules, err := decodeRules(strings.NewReader(manifest), "rbac.yaml", map[string]string{"op": "test-ns", "default": "default"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.Role+" in "+r.Namespace+": "+strings.Join(r.grants(), ", "))
	}
	want := []string{
		"rbac.yaml: ClusterRole op in : list things.g.io, watch things.g.io",
		"rbac.yaml: ClusterRole op in : update things/status.g.io",
		"rbac.yaml: Role op/op in test-ns: get secrets",
		"rbac.yaml: Role op/op in test-ns: get leases.coordination.k8s.io, update leases.coordination.k8s.io",
		"rbac.yaml: Role default/op-events in default: create events",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if rules, err := decodeRules(strings.NewReader(manifest), "rbac.yaml", nil); err != nil {
		t.Error(err)
	} else if rules[2].Namespace != "op" {
		t.Errorf("without a mapping, the Role op is in %q, want op", rules[2].Namespace)
	}
	if _, err := decodeRules(strings.NewReader(manifest), "rbac.yaml", map[string]string{"op": "test-ns"}); err == nil || !strings.Contains(err.Error(), `"default"`) {
		t.Errorf("a Role in an unmapped namespace: got %v, want an error naming it", err)
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: op}\n",
		"apiVersion: example.io/v1\nkind: Role\nmetadata: {name: op, namespace: op}\nrules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
	} {
		if _, err := decodeRules(strings.NewReader(doc), "rbac.yaml", nil); err == nil || !strings.Contains(err.Error(), "no Role or ClusterRole rules") {
			t.Errorf("%s: got %v, want no rules", doc, err)
		}
	}
}

func TestCheck(t *testing.T) {
	rules, err := decodeRules(strings.NewReader(manifest), "rbac.yaml", map[string]string{"op": "ns", "default": "default"})
	if err != nil {
		t.Fatal(err)
	}
	all := []Request{
		{Verb: "list", Group: "g.io", Resource: "things"},
		{Verb: "watch", Group: "g.io", Resource: "things"},
		{Verb: "update", Group: "g.io", Resource: "things/status", Name: "t"},
		{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"},
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns", Name: "op"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns", Name: "op"},
		{Verb: "create", Resource: "events", Namespace: "default"},
	}
	without := func(verb, resource string) []Request {
		return slices.DeleteFunc(slices.Clone(all), func(r Request) bool { return r.Verb == verb && r.Resource == resource })
	}
	for _, tc := range []struct {
		name    string
		reqs    []Request
		excused map[string]string
		want    []string
	}{
		{"every grant used, every request allowed", all, nil, nil},
		{"a request in the Role's namespace's stead is not allowed",
			append(slices.Clone(all), Request{Verb: "get", Resource: "secrets", Namespace: "other", Name: "s"}),
			nil, []string{`the controller sent get secrets "s" in namespace "other", which no rule allows`}},
		{"a cluster-scoped request is not allowed by a Role",
			append(slices.Clone(all), Request{Verb: "get", Resource: "secrets", Name: "s"}),
			nil, []string{`the controller sent get secrets "s", which no rule allows`}},
		{"a verb not granted is not allowed, and reported once",
			append(slices.Clone(all), Request{Verb: "delete", Group: "g.io", Resource: "things", Name: "t"}, Request{Verb: "delete", Group: "g.io", Resource: "things", Name: "t"}),
			nil, []string{`the controller sent delete things.g.io "t", which no rule allows`}},
		{"a subresource is not its resource",
			append(slices.Clone(all), Request{Verb: "update", Group: "g.io", Resource: "things", Name: "t"}),
			nil, []string{`the controller sent update things.g.io "t", which no rule allows`}},
		{"resourceNames limit a rule to those names",
			append(slices.Clone(all), Request{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns", Name: "another"}),
			nil, []string{`the controller sent get leases.coordination.k8s.io "another" in namespace "ns", which no rule allows`}},
		{"resourceNames never allow a create",
			append(slices.Clone(all), Request{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "ns"}),
			nil, []string{`the controller sent create leases.coordination.k8s.io in namespace "ns", which no rule allows`}},
		{"a non-resource request is not allowed by resource rules",
			append(slices.Clone(all), Request{Verb: "get", Path: "/metrics"}),
			nil, []string{`the controller sent get /metrics, which no rule allows`}},
		{"an unused grant is reported with its role",
			without("watch", "things"), nil,
			[]string{`rbac.yaml: ClusterRole op grants "watch things.g.io", which the controller never used`}},
		{"an unused subresource grant is reported",
			without("update", "things/status"), nil,
			[]string{`rbac.yaml: ClusterRole op grants "update things/status.g.io", which the controller never used`}},
		{"an excused grant may go unused",
			without("create", "events"), map[string]string{"create events": "only on failures"}, nil},
		{"an excused grant may be used", all, map[string]string{"create events": "only on failures"}, nil},
		{"an excuse needs a reason",
			without("create", "events"), map[string]string{"create events": ""},
			[]string{`rbac.yaml: Role default/op-events grants "create events", which the controller never used`,
				`"create events" is excused without a reason`}},
		{"an excuse for what is not granted is stale",
			all, map[string]string{"patch events": "repeats"}, []string{`"patch events" is excused, but no rule grants it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(rules, tc.reqs, tc.excused); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A grant is used only by requests its own rule allowed: the same verb in
// two namespaces' Roles is two grants.
func TestCheckUsagePerRule(t *testing.T) {
	get := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	rules := []Rule{{PolicyRule: get, Namespace: "a", Role: "Role a/r"}, {PolicyRule: get, Namespace: "b", Role: "Role b/r"}}
	got := check(rules, []Request{{Verb: "get", Resource: "secrets", Namespace: "a", Name: "s"}}, nil)
	want := []string{`Role b/r grants "get secrets", which the controller never used`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Wildcards allow what RBAC allows, and are reported: a wildcard is never
// used in full.
func TestCheckWildcards(t *testing.T) {
	rules := []Rule{
		{PolicyRule: rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*/status"}, Verbs: []string{"update"}}, Role: "ClusterRole status"},
		{PolicyRule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"*"}}, Namespace: "ns", Role: "Role ns/all"},
		{PolicyRule: rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz/*"}, Verbs: []string{"get"}}, Role: "ClusterRole health"},
	}
	got := check(rules, []Request{
		{Verb: "update", Group: "g.io", Resource: "things/status", Name: "t"},
		{Verb: "deletecollection", Resource: "pods", Namespace: "ns"},
		{Verb: "get", Path: "/healthz/etcd"},
		{Verb: "update", Group: "g.io", Resource: "things", Name: "t"},
	}, nil)
	want := []string{
		`the controller sent update things.g.io "t", which no rule allows`,
		`ClusterRole status grants "update */status.*", which the controller never used`,
		`Role ns/all grants "* *", which the controller never used`,
		`ClusterRole health grants "get /healthz/*", which the controller never used`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Reads of the discovery documents need no rule (system:discovery grants
// them to every user); other non-resource requests and writes do.
func TestCheckDiscovery(t *testing.T) {
	reqs := []Request{
		{Verb: "get", Path: "/api"},
		{Verb: "get", Path: "/apis"},
		{Verb: "get", Path: "/apis/apps/v1"},
		{Verb: "get", Path: "/version"},
		{Verb: "get", Path: "/openapi/v3"},
		{Verb: "get", Path: "/metrics"},
		{Verb: "post", Path: "/apis"},
		{Verb: "get", Path: "/apiserver"},
	}
	want := []string{
		"the controller sent get /metrics, which no rule allows",
		"the controller sent post /apis, which no rule allows",
		"the controller sent get /apiserver, which no rule allows",
	}
	if diff := cmp.Diff(want, check(nil, reqs, nil)); diff != "" {
		t.Errorf("complaints (-want +got):\n%s", diff)
	}
}
