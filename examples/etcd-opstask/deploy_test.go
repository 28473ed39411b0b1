package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/opstask/exampleapi"
)

// deploy/crd.yaml is the CRD that controller-gen generates for
// opstask/exampleapi; go generate copies it (see main.go).
func TestDeployCRDIsGenerated(t *testing.T) {
	got, err := os.ReadFile("deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, exampleapi.CRD) {
		t.Errorf("deploy/crd.yaml differs from exampleapi.CRD: run go generate ./examples/etcd-opstask")
	}
}
