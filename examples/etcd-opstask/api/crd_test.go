package api_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
)

// The CRD that controller-gen generated (../deploy/crd.yaml) matches the Go
// types of this package, field by field, and has the rules opstask needs,
// among them status.lastErrors bounded by opstask.MaxLastErrors: tasks.CRD
// checks them all.
func TestCRDMatchesTheGoTypes(t *testing.T) {
	data, err := os.ReadFile("../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	crd, err := tasks.CRD(data, &api.EtcdOpsTask{}, scheme, &tasks.Options{TargetField: api.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != api.Version {
		t.Fatalf("CRD versions %+v, want only %s", crd.Spec.Versions, api.Version)
	}
}
