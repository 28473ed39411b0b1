package api_test

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// TestLastErrorsBoundMatchesCode guards the one number the CRD and the code
// must share: the CRD marker is a literal, the code a constant.
func TestLastErrorsBoundMatchesCode(t *testing.T) {
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								MaxItems *int `json:"maxItems"`
							}
						}
					} `json:"openAPIV3Schema"`
				}
			}
		}
	}
	data, err := os.ReadFile("../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != api.Version {
		t.Fatalf("CRD versions %+v, want only %s", crd.Spec.Versions, api.Version)
	}
	got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["lastErrors"].MaxItems
	if got == nil || *got != opstask.MaxLastErrors {
		t.Fatalf("CRD status.lastErrors.maxItems = %v, want opstask.MaxLastErrors = %d", got, opstask.MaxLastErrors)
	}
}
