package kubestore_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperController())
	}
	testenv.Main(m)
}

var crdOnce struct {
	sync.Once
	err error
}

// kube is a test's control plane with opstasktest's TestTask CRD installed.
type kube struct {
	*testenv.Kubernetes
	dyn dynamic.Interface
}

func startKube(t testing.TB) *kube {
	t.Helper()
	env := testenv.StartKubernetes(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() { crdOnce.err = opstasktest.InstallCRD(context.Background(), dyn) })
	if crdOnce.err != nil {
		t.Fatalf("install CRD: %v", crdOnce.err)
	}
	return &kube{Kubernetes: env, dyn: dyn}
}

// store returns a store over the test's namespace, with its own client from
// cfg (nil: the test's config).
func (k *kube) store(t testing.TB, cfg *rest.Config) *kubestore.Store {
	t.Helper()
	dyn := k.dyn
	if cfg != nil {
		var err error
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	s, err := kubestore.New(kubestore.Config{Client: dyn, Resource: opstasktest.Resource, Kind: opstasktest.GroupVersionKind.Kind,
		Namespace: k.Namespace, TargetField: opstasktest.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// object renders a task as a TestTask object.
func (k *kube) object(t *opstask.Task) *unstructured.Unstructured {
	cfg := map[string]any{}
	for name, raw := range t.Spec.Config {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			panic(err)
		}
		cfg[name] = v
	}
	spec := map[string]any{"config": cfg}
	if t.Spec.Target != "" {
		spec[opstasktest.TargetField] = t.Spec.Target
	}
	if t.Spec.TTLSecondsAfterFinished != nil {
		spec["ttlSecondsAfterFinished"] = int64(*t.Spec.TTLSecondsAfterFinished)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(opstasktest.GroupVersionKind)
	u.SetName(t.Name)
	u.SetNamespace(k.Namespace)
	if len(t.Approvals) > 0 {
		u.SetAnnotations(map[string]string{opstask.ApprovalAnnotation: strings.Join(t.Approvals, ",")})
	}
	return u
}

// create creates a task as a user would; the status is ignored (status
// subresource).
func (k *kube) create(ctx context.Context, s *kubestore.Store, t *opstask.Task) (*opstask.Task, error) {
	got, err := k.dyn.Resource(opstasktest.Resource).Namespace(k.Namespace).Create(ctx, k.object(t), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return s.FromUnstructured(got)
}

// approve adds token to the approval annotation of the task name, as a
// person does with kubectl annotate (a merge patch, whatever the version).
func (k *kube) approve(ctx context.Context, name, token string) error {
	patch := `{"metadata":{"annotations":{"` + opstask.ApprovalAnnotation + `":"` + token + `"}}}`
	_, err := k.dyn.Resource(opstasktest.Resource).Namespace(k.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// tasks lists the namespace's tasks by name.
func (k *kube) tasks(t testing.TB, s *kubestore.Store) map[string]*opstask.Task {
	t.Helper()
	list, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*opstask.Task{}
	for _, task := range list {
		m[task.Name] = task
	}
	return m
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func task(name, kind string, config any, target string) *opstask.Task {
	raw, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	return &opstask.Task{Name: name, Spec: opstask.Spec{Config: map[string]json.RawMessage{kind: raw}, Target: target}}
}
