package tasks

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// CRD returns the CustomResourceDefinition of a task resource, decoded
// from crdYAML, the file controller-gen generated from the Go type of obj
// (embed it with go:embed), after checking it against that type and against
// what opstask requires of every task resource. A CRD that drifted from its
// type (a field added, renamed or removed since it was generated) or that
// lacks one of the rules is refused, with an error naming the field and the
// marker to add: call it in a test of the package that holds the type (and
// before InstallCRD at start-up), so that a stale file is never installed.
// Install the result with InstallCRD, or apply the same file with kubectl.
//
// obj is a typed task object registered in scheme; opts.TargetField names
// the target field (opts may be nil). The checks:
//
//   - the CRD's group and kind are obj's, and it serves obj's version with
//     the status subresource;
//   - at every level, the schema's properties are the JSON fields of the Go
//     type and have its JSON types (object, array, string, integer, number,
//     boolean; types with their own JSON encoding are not looked into);
//   - spec.config has exactly one member: either minProperties and
//     maxProperties 1 (for any config type), or an exists_one CEL rule over
//     has(self.<member>) of exactly its members (for a struct of optional
//     members);
//   - spec.config, and spec.<TargetField> when set, cannot change after
//     creation (a CEL rule "self == oldSelf" on each), and neither can be
//     removed and put back with other values, which a transition rule does
//     not see (it is not evaluated when the field is absent on one side):
//     spec is required at the root, config is required in spec or has the
//     rule "has(self.config) == has(oldSelf.config)" on spec, and the
//     target has the rule "has(self.<TargetField>) ==
//     has(oldSelf.<TargetField>)" on spec;
//   - status.lastErrors has maxItems opstask.MaxLastErrors, status.steps
//     maxItems opstask.MaxSteps and status.approvals maxItems
//     opstask.MaxApprovals (opstask.Status says so; a CRD without steps or
//     approvals would prune them, and a resumed execution would repeat its
//     steps or ask again; one without status.startedWith, which the
//     schema's match with the Go type finds, would fail every takeover).
//
// The markers that give them, with a target field etcdName and config
// members a and b (an error names the one missing):
//
//	// on the task type (and its Spec field without omitempty: required):
//	// +kubebuilder:subresource:status
//	// on the spec type (and its Config field without omitempty: required;
//	// or, for an optional config, the rule
//	// "has(self.config) == has(oldSelf.config)" beside the target's):
//	// +kubebuilder:validation:XValidation:rule="has(self.etcdName) == has(oldSelf.etcdName)",message="etcdName cannot be added or removed after creation"
//	// on the config type:
//	// +kubebuilder:validation:XValidation:rule="[has(self.a), has(self.b)].exists_one(x, x)",message="exactly one of a, b must be set"
//	// on the config field:
//	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable"
//	// on the target field:
//	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="etcdName is immutable"
//
// What it does not check: descriptions, printer columns, defaults and the
// per-kind validations the type's markers add (they are the type's own), and
// the meaning of a CEL rule beyond the text above. Why controller-gen and not
// a schema built at run time from the Go type by reflection: reflection sees
// neither doc comments (kubectl explain) nor enums, defaults and per-kind
// rules, which a task API needs and controller-gen's markers give; this
// function keeps the generated file honest instead.
func CRD(crdYAML []byte, obj client.Object, scheme *runtime.Scheme, opts *Options) (*apiextensionsv1.CustomResourceDefinition, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("%w: crt: task CRD: %w", opstask.ErrInvalidConfig, err)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: crt: CRD %s: %s", opstask.ErrInvalidConfig, crd.Name, fmt.Sprintf(format, args...))
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fail("task object %T: %v", obj, err)
	}
	if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
		return nil, fail("spec.group %q, spec.names.kind %q: want %q and %q, the task object's", crd.Spec.Group, crd.Spec.Names.Kind, gvk.Group, gvk.Kind)
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == gvk.Version })
	if i < 0 || !crd.Spec.Versions[i].Served {
		return nil, fail("version %s is not served", gvk.Version)
	}
	v := crd.Spec.Versions[i]
	if v.Subresources == nil || v.Subresources.Status == nil {
		return nil, fail("version %s has no status subresource: add // +kubebuilder:subresource:status to %s", v.Name, gvk.Kind)
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fail("version %s has no schema", v.Name)
	}
	root := v.Schema.OpenAPIV3Schema
	if err := matchSchema("", root, reflect.TypeOf(obj)); err != nil {
		return nil, fail("%v: regenerate it (controller-gen) from %T", err, obj)
	}
	spec, status := root.Properties["spec"], root.Properties["status"]
	config, ok := spec.Properties["config"]
	if !ok {
		return nil, fail("spec.config is missing: a task's spec has DEP-05's one-of config")
	}
	if err := checkOneOf(config); err != nil {
		return nil, fail("spec.config: %v", err)
	}
	if !hasRule(config, "self == oldSelf") {
		return nil, fail(`spec.config may change after creation: add // +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable" to it`)
	}
	// A transition rule is evaluated only when the field is there on both
	// sides: a config (or a spec) that may be removed may be put back with
	// other values, and "self == oldSelf" never sees it.
	if !slices.Contains(root.Required, "spec") && !hasRule(*root, "has(self.spec) == has(oldSelf.spec)") {
		return nil, fail(`spec may be removed, and put back with another config, after creation: make it required (a spec field without omitempty, which controller-gen marks required)`)
	}
	if !slices.Contains(spec.Required, "config") && !hasRule(spec, "has(self.config) == has(oldSelf.config)") {
		return nil, fail(`spec.config may be removed, and put back with other values, after creation ("self == oldSelf" is not evaluated when it is absent on one side): make it required (a config field without omitempty and +optional), or add // +kubebuilder:validation:XValidation:rule="has(self.config) == has(oldSelf.config)",message="config cannot be added or removed after creation" to the spec type`)
	}
	if tf := o.TargetField; tf != "" {
		target, ok := spec.Properties[tf]
		switch {
		case !ok:
			return nil, fail("spec.%s, the target field, is not in the schema", tf)
		case !hasRule(target, "self == oldSelf"):
			return nil, fail(`spec.%s may change after creation: add // +kubebuilder:validation:XValidation:rule="self == oldSelf",message="%s is immutable" to it`, tf, tf)
		case !hasRule(spec, fmt.Sprintf("has(self.%s) == has(oldSelf.%s)", tf, tf)):
			return nil, fail(`spec.%[1]s may be added or removed after creation: add // +kubebuilder:validation:XValidation:rule="has(self.%[1]s) == has(oldSelf.%[1]s)",message="%[1]s cannot be added or removed after creation" to the spec type`, tf)
		}
	}
	lastErrors := status.Properties["lastErrors"]
	if lastErrors.MaxItems == nil || *lastErrors.MaxItems != opstask.MaxLastErrors {
		return nil, fail("status.lastErrors: maxItems %v, want opstask.MaxLastErrors (%d): the status is not opstask.Status", lastErrors.MaxItems, opstask.MaxLastErrors)
	}
	// A CRD generated before opstask.Status had steps would prune them
	// from every status write: a resumed execution would repeat its
	// completed steps.
	steps, ok := status.Properties["steps"]
	if !ok || steps.MaxItems == nil || *steps.MaxItems != opstask.MaxSteps {
		return nil, fail("status.steps: maxItems %v, want opstask.MaxSteps (%d): the status is not opstask.Status (regenerate the CRD)", steps.MaxItems, opstask.MaxSteps)
	}
	approvals := status.Properties["approvals"]
	if approvals.MaxItems == nil || *approvals.MaxItems != opstask.MaxApprovals {
		return nil, fail("status.approvals: maxItems %v, want opstask.MaxApprovals (%d): the status is not opstask.Status (regenerate the CRD)", approvals.MaxItems, opstask.MaxApprovals)
	}
	return crd, nil
}

func hasRule(s apiextensionsv1.JSONSchemaProps, rule string) bool {
	return slices.ContainsFunc(s.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule })
}

var hasMember = regexp.MustCompile(`has\(self\.([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkOneOf checks that config admits exactly one member.
func checkOneOf(config apiextensionsv1.JSONSchemaProps) error {
	if config.MinProperties != nil && *config.MinProperties == 1 && config.MaxProperties != nil && *config.MaxProperties == 1 {
		return nil
	}
	members := make([]string, 0, len(config.Properties))
	for name := range config.Properties {
		members = append(members, name)
	}
	sort.Strings(members)
	for _, r := range config.XValidations {
		if !strings.Contains(r.Rule, ".exists_one(") {
			continue
		}
		var named []string
		for _, m := range hasMember.FindAllStringSubmatch(r.Rule, -1) {
			named = append(named, m[1])
		}
		sort.Strings(named)
		if slices.Equal(slices.Compact(named), members) {
			return nil
		}
		return fmt.Errorf("rule %q names %v, want exactly the members %v", r.Rule, named, members)
	}
	has := make([]string, len(members))
	for i, m := range members {
		has[i] = "has(self." + m + ")"
	}
	return fmt.Errorf(`nothing requires exactly one member: add // +kubebuilder:validation:XValidation:rule="[%s].exists_one(x, x)",message="exactly one of %s must be set" to its type (or MinProperties=1 and MaxProperties=1)`,
		strings.Join(has, ", "), strings.Join(members, ", "))
}

var (
	timeType        = reflect.TypeFor[metav1.Time]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	errSchemaDrifts = errors.New("schema differs from the Go type")
)

// matchSchema checks that s describes values of Go type t as encoding/json
// writes them: same JSON type, and for structs the same property names.
func matchSchema(path string, s *apiextensionsv1.JSONSchemaProps, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := path
	if at == "" {
		at = "the root"
	}
	if t == timeType {
		return wantType(at, s, "string", t)
	}
	if t == objectMetaType || t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return nil // its own encoding: metadata, Quantity, IntOrString, RawExtension
	}
	switch t.Kind() {
	case reflect.Struct:
		if err := wantType(at, s, "object", t); err != nil {
			return err
		}
		fields := map[string]reflect.Type{}
		jsonFields(t, fields)
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ft := fields[name]
			p, ok := s.Properties[name]
			if !ok {
				return fmt.Errorf("%w: %s: field %s of %s is not in the schema", errSchemaDrifts, at, name, t)
			}
			if err := matchSchema(strings.TrimPrefix(path+"."+name, "."), &p, ft); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if _, ok := fields[name]; !ok {
				return fmt.Errorf("%w: %s: property %s is not a field of %s", errSchemaDrifts, at, name, t)
			}
		}
		return nil
	case reflect.Map:
		if err := wantType(at, s, "object", t); err != nil {
			return err
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			return matchSchema(path+"[*]", s.AdditionalProperties.Schema, t.Elem())
		}
		return nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return wantType(at, s, "string", t)
		}
		if err := wantType(at, s, "array", t); err != nil {
			return err
		}
		if s.Items != nil && s.Items.Schema != nil {
			return matchSchema(path+"[*]", s.Items.Schema, t.Elem())
		}
		return nil
	case reflect.String:
		return wantType(at, s, "string", t)
	case reflect.Bool:
		return wantType(at, s, "boolean", t)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return wantType(at, s, "integer", t)
	case reflect.Float32, reflect.Float64:
		return wantType(at, s, "number", t)
	}
	return nil // interfaces and the like: anything goes
}

func wantType(at string, s *apiextensionsv1.JSONSchemaProps, typ string, t reflect.Type) error {
	if s.Type != typ {
		return fmt.Errorf("%w: %s: type %q, want %q for %s", errSchemaDrifts, at, s.Type, typ, t)
	}
	return nil
}

// jsonFields adds the fields that encoding/json writes for struct type t,
// by JSON name, with the fields of inlined embedded structs.
func jsonFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			jsonFields(ft, into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
}

// InstallCRD creates crd, or updates the CustomResourceDefinition of its
// name to it, through c (its spec, labels and annotations replace those on
// the cluster; an update that conflicts with another writer's is retried
// from a fresh read), then
// waits until the API server has established it and serves its kind in
// every served version, reading through r (mgr.GetAPIReader(): the cache is
// not started before the manager is). It waits at most a minute, and never
// longer than ctx. For tests, and for an operator's --install-crds: the
// operator then needs RBAC to get, create and update
// customresourcedefinitions.
//
// It never downgrades: when the CRD on the cluster has something crd lacks
// — a property at some path of a version's schema (which the API server
// would prune from every object it stores: status.steps from tasks), or
// its storage version — the installed CRD is newer (a replica of an older
// release restarting during a rolling update, or after a rollback), and
// InstallCRD leaves it as it is, logs at Info (the logger of ctx) what crd
// lacks, and waits until it is served as usual: the older replica runs on
// the newer schema, which keeps every field it writes. So a field is never
// removed by InstallCRD; Kubernetes API conventions remove fields with a
// new API version, and a removal within a version is a person's deliberate
// act (kubectl replace). Rules, enums and other validations are not
// compared: a CRD with the same properties replaces the installed one.
func InstallCRD(ctx context.Context, c client.Client, r client.Reader, crd *apiextensionsv1.CustomResourceDefinition) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return fmt.Errorf("crt: install CRD %s: %w", crd.Name, err)
	}
	crdGVK := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	u := &unstructured.Unstructured{Object: want}
	u.SetGroupVersionKind(crdGVK)
	u.SetResourceVersion("")
	err = c.Create(ctx, u)
	var lacks []string // what crd lacks of the installed CRD, which is newer
	if apierrors.IsAlreadyExists(err) {
		// Another installer (a replica, a parallel test) may update it at
		// the same time: a conflict is retried from the read, and the
		// comparison with what is installed is made again on it.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(crdGVK)
			if err := r.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
				return err
			}
			installed := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, installed); err != nil {
				return fmt.Errorf("read the installed CRD: %w", err)
			}
			if lacks = lackedBy(installed, crd); len(lacks) > 0 {
				return nil
			}
			cur.Object["spec"] = want["spec"]
			cur.SetLabels(crd.Labels)
			cur.SetAnnotations(crd.Annotations)
			return c.Update(ctx, cur)
		})
	}
	if err != nil {
		return fmt.Errorf("crt: install CRD %s: %w", crd.Name, err)
	}
	if len(lacks) > 0 {
		logr.FromContextOrDiscard(ctx).Info("crt: CRD not replaced: the installed one is newer than this release's, which lacks what the API server would then prune; it stays as it is",
			"crd", crd.Name, "lacks", lacks)
	}
	var last error
	served := func(ctx context.Context) (bool, error) {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(crdGVK)
		if last = r.Get(ctx, client.ObjectKey{Name: crd.Name}, got); last != nil {
			return false, nil
		}
		if last = runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, cur); last != nil {
			return false, nil
		}
		established := slices.ContainsFunc(cur.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		})
		if !established {
			last = errors.New("not established")
			return false, nil
		}
		// Established can precede the first list that succeeds.
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			listKind := crd.Spec.Names.ListKind
			if listKind == "" {
				listKind = crd.Spec.Names.Kind + "List"
			}
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(crd.Spec.Group + "/" + v.Name)
			l.SetKind(listKind)
			if last = r.List(ctx, l, client.Limit(1)); last != nil {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, served); err != nil {
		return fmt.Errorf("crt: CRD %s not served: %w (last: %v)", crd.Name, err, last)
	}
	return nil
}

// lackedBy returns what the CRD next lacks of the installed CRD, so that
// replacing installed by next would lose it: installed's storage version,
// and, in each version both serve, every property path of installed's
// schema that next's does not have (the API server prunes unknown fields
// from what it stores) — "v1: status.steps". A subtree that next keeps
// whole (x-kubernetes-preserve-unknown-fields) lacks nothing. Versions
// installed has besides its storage version may go: the API server
// refuses to drop one that objects are still stored in.
func lackedBy(installed, next *apiextensionsv1.CustomResourceDefinition) []string {
	var lacks []string
	for _, iv := range installed.Spec.Versions {
		i := slices.IndexFunc(next.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == iv.Name })
		if i < 0 {
			if iv.Storage {
				lacks = append(lacks, "version "+iv.Name+" (the storage version)")
			}
			continue
		}
		nv := next.Spec.Versions[i]
		var is, ns *apiextensionsv1.JSONSchemaProps
		if iv.Schema != nil {
			is = iv.Schema.OpenAPIV3Schema
		}
		if nv.Schema != nil {
			ns = nv.Schema.OpenAPIV3Schema
		}
		lacks = append(lacks, lackedPaths(iv.Name+": ", "", is, ns)...)
	}
	return lacks
}

// lackedPaths returns the property paths under path of schema a that
// schema b does not have.
func lackedPaths(version, path string, a, b *apiextensionsv1.JSONSchemaProps) []string {
	if a == nil {
		return nil
	}
	at := path
	if at == "" {
		at = "the root"
	}
	if b == nil {
		return []string{version + at}
	}
	if b.XPreserveUnknownFields != nil && *b.XPreserveUnknownFields {
		return nil
	}
	var lacks []string
	for _, name := range slices.Sorted(maps.Keys(a.Properties)) {
		ap := a.Properties[name]
		sub := strings.TrimPrefix(path+"."+name, ".")
		bp, ok := b.Properties[name]
		if !ok {
			lacks = append(lacks, version+sub)
			continue
		}
		lacks = append(lacks, lackedPaths(version, sub, &ap, &bp)...)
	}
	if a.Items != nil && a.Items.Schema != nil {
		var bi *apiextensionsv1.JSONSchemaProps
		if b.Items != nil {
			bi = b.Items.Schema
		}
		lacks = append(lacks, lackedPaths(version, path+"[*]", a.Items.Schema, bi)...)
	}
	if a.AdditionalProperties != nil && a.AdditionalProperties.Schema != nil {
		var ba *apiextensionsv1.JSONSchemaProps
		if b.AdditionalProperties != nil {
			ba = b.AdditionalProperties.Schema
		}
		lacks = append(lacks, lackedPaths(version, path+"[*]", a.AdditionalProperties.Schema, ba)...)
	}
	return lacks
}
