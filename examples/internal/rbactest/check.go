package rbactest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Rule is one rule of a Role or ClusterRole.
type Rule struct {
	rbacv1.PolicyRule
	// Namespace is the Role's namespace, empty for a ClusterRole's rule.
	Namespace string
	// Role names the role in messages, as in "deploy/rbac.yaml: Role
	// ns/name".
	Role string
}

// Rules returns the rules of every Role and ClusterRole in file, a YAML
// stream of manifests; other kinds are skipped. namespaces maps the
// namespace of each Role in file to the one the test runs the controller
// in; a Role in a namespace it does not map fails the test. With nil
// namespaces, Roles keep the namespaces the file gives them. A file without
// any rule fails the test.
func Rules(t testing.TB, file string, namespaces map[string]string) []Rule {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := decodeRules(f, file, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func decodeRules(r io.Reader, file string, namespaces map[string]string) ([]Rule, error) {
	var out []Rule
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		// A ClusterRole has the fields of a Role that matter here; its
		// aggregationRule is not followed.
		var role rbacv1.Role
		if err := dec.Decode(&role); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !strings.HasPrefix(role.APIVersion, rbacv1.GroupName+"/") {
			continue
		}
		var ns, name string
		switch role.Kind {
		case "ClusterRole":
			name = "ClusterRole " + role.Name
		case "Role":
			name = "Role " + role.Namespace + "/" + role.Name
			ns = role.Namespace
			if namespaces != nil {
				var ok bool
				if ns, ok = namespaces[role.Namespace]; !ok {
					return nil, fmt.Errorf("%s: %s: the test does not say which namespace stands for %q", file, name, role.Namespace)
				}
			}
			if ns == "" {
				return nil, fmt.Errorf("%s: %s has no namespace", file, name)
			}
		default:
			continue
		}
		for _, pr := range role.Rules {
			out = append(out, Rule{PolicyRule: pr, Namespace: ns, Role: file + ": " + name})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no Role or ClusterRole rules", file)
	}
	return out, nil
}

// allows reports whether the rule allows req, as RBAC decides.
func (r Rule) allows(req Request) bool {
	if r.Namespace != "" && r.Namespace != req.Namespace {
		return false
	}
	if !matches(r.Verbs, req.Verb) {
		return false
	}
	if req.Path != "" {
		return slices.ContainsFunc(r.NonResourceURLs, func(u string) bool {
			if prefix, ok := strings.CutSuffix(u, "*"); ok {
				return strings.HasPrefix(req.Path, prefix)
			}
			return u == req.Path
		})
	}
	return matches(r.APIGroups, req.Group) && resourceMatches(r.Resources, req.Resource) &&
		(len(r.ResourceNames) == 0 || req.Name != "" && slices.Contains(r.ResourceNames, req.Name))
}

func matches(granted []string, v string) bool {
	return slices.Contains(granted, rbacv1.VerbAll) || slices.Contains(granted, v)
}

func resourceMatches(granted []string, resource string) bool {
	if slices.Contains(granted, rbacv1.ResourceAll) || slices.Contains(granted, resource) {
		return true
	}
	// "*/status" grants the status of every resource.
	_, sub, ok := strings.Cut(resource, "/")
	return ok && slices.Contains(granted, "*/"+sub)
}

// key names a grant in Check's messages and excuses.
func key(verb, group, resource string) string {
	if strings.HasPrefix(resource, "/") {
		return verb + " " + resource
	}
	return verb + " " + schema.GroupResource{Group: group, Resource: resource}.String()
}

// grants expands a rule into the keys of what it grants.
func (r Rule) grants() []string {
	var keys []string
	for _, v := range r.Verbs {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				keys = append(keys, key(v, g, res))
			}
		}
		for _, u := range r.NonResourceURLs {
			keys = append(keys, key(v, "", u))
		}
	}
	return keys
}

// Check fails t for each request in reqs that no rule allows (reads of the
// discovery documents aside: every authenticated user may make them), and for each
// verb a rule grants that no request allowed by that rule used, unless
// excused maps the grant to the reason it may go unused (a path of the
// controller the test does not take, say).
//
// Grants are named "verb resource[.group]", the resource with its
// "/subresource" and the group left out for the core group, or "verb /path"
// for a non-resource URL: "patch events", "get leases.coordination.k8s.io",
// "update backupentries/status.backup.examples.groundskeeper.io". An excuse
// without a reason, or for something no rule grants, fails t too, so
// excuses cannot go stale unnoticed.
func Check(t testing.TB, rules []Rule, reqs []Request, excused map[string]string) {
	t.Helper()
	for _, msg := range check(rules, reqs, excused) {
		t.Error(msg)
	}
	t.Logf("%d API requests checked against %d RBAC rules", len(reqs), len(rules))
}

// isDiscovery reports whether req reads a discovery document (/api,
// /apis/<group>/<version>, /version, /openapi/...), which a cluster grants
// every authenticated user through its ClusterRole system:discovery, not
// through the controller's Role: a controller-runtime manager's REST mapper
// reads them.
func isDiscovery(req Request) bool {
	if req.Path == "" || req.Verb != "get" {
		return false
	}
	for _, p := range []string{"/api", "/apis", "/version", "/openapi"} {
		if req.Path == p || strings.HasPrefix(req.Path, p+"/") {
			return true
		}
	}
	return false
}

// check returns Check's complaints.
func check(rules []Rule, reqs []Request, excused map[string]string) []string {
	var msgs []string
	used := make([]map[string]bool, len(rules))
	for i := range used {
		used[i] = map[string]bool{}
	}
	denied := map[Request]bool{}
	for _, req := range reqs {
		if isDiscovery(req) {
			continue
		}
		allowed := false
		for i, rule := range rules {
			if rule.allows(req) {
				allowed = true
				res := req.Resource
				if req.Path != "" {
					res = req.Path
				}
				used[i][key(req.Verb, req.Group, res)] = true
			}
		}
		if !allowed && !denied[req] {
			denied[req] = true
			msgs = append(msgs, fmt.Sprintf("the controller sent %s, which no rule allows", req))
		}
	}
	granted := map[string]bool{}
	for i, rule := range rules {
		for _, k := range rule.grants() {
			granted[k] = true
			if !used[i][k] && excused[k] == "" {
				msgs = append(msgs, fmt.Sprintf("%s grants %q, which the controller never used", rule.Role, k))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(excused)) {
		switch {
		case !granted[k]:
			msgs = append(msgs, fmt.Sprintf("%q is excused, but no rule grants it", k))
		case excused[k] == "":
			msgs = append(msgs, fmt.Sprintf("%q is excused without a reason", k))
		}
	}
	return msgs
}
