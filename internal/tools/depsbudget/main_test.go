package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestBudgetFileRoundTrips(t *testing.T) {
	costs := []cost{
		{pkg: ".", packages: 1},
		{pkg: "lifecycle", packages: 261, modules: []string{"k8s.io/api", "k8s.io/client-go"}},
		{pkg: "retention", packages: 1},
	}
	var buf bytes.Buffer
	format(&buf, costs)
	got, err := parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range costs {
		if g := got[c.pkg]; g.packages != c.packages || !reflect.DeepEqual(g.modules, c.modules) {
			t.Errorf("%s: read back %d packages, modules %v; wrote %d, %v", c.pkg, g.packages, g.modules, c.packages, c.modules)
		}
	}
	if len(got) != len(costs) {
		t.Errorf("read back %d packages, wrote %d", len(got), len(costs))
	}
}

func TestParseRefusesWhatFormatDoesNotWrite(t *testing.T) {
	for _, in := range []string{
		"\tk8s.io/api\n",                 // a module before any package
		"retention: one packages\n",      // not a count
		"retention\n",                    // no count
		"a: 1 packages\na: 2 packages\n", // twice
	} {
		if _, err := parse([]byte(in)); err == nil {
			t.Errorf("parse(%q): no error", in)
		}
	}
}

// A heavy import into retention: retention's line names the import and
// the modules it brings; lifecycle, which imports retention, is named in
// one line that points there.
func TestCompareNamesTheImportThatBringsModules(t *testing.T) {
	budget := map[string]cost{
		"retention": {pkg: "retention", packages: 1},
		"lifecycle": {pkg: "lifecycle", packages: 261, modules: []string{"k8s.io/api"}},
	}
	aws := step{from: "retention", to: "github.com/aws/aws-sdk-go-v2/service/s3"}
	costs := []cost{
		{pkg: "lifecycle", packages: 263, modules: []string{"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go", "k8s.io/api"},
			via: map[string]step{"github.com/aws/aws-sdk-go-v2": aws, "github.com/aws/smithy-go": aws}},
		{pkg: "retention", packages: 3, modules: []string{"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go"},
			via: map[string]step{"github.com/aws/aws-sdk-go-v2": aws, "github.com/aws/smithy-go": aws}},
	}
	got := strings.Join(compare(costs, budget), "\n")
	for _, want := range []string{
		"lifecycle pulls in 2 modules its budget does not allow; through retention, which gains them too",
		"lifecycle compiles 263 packages, 2 more than its budget of 261",
		"retention pulls in 2 modules its budget does not allow:\n\tretention imports github.com/aws/aws-sdk-go-v2/service/s3, which brings in:\n\t\t+ github.com/aws/aws-sdk-go-v2\n\t\t+ github.com/aws/smithy-go",
		"retention compiles 3 packages, 2 more than its budget of 1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("compare says\n%s\n\nwant it to say\n%s", got, want)
		}
	}
}

func TestCompareWantsTheBudgetTight(t *testing.T) {
	budget := map[string]cost{
		"backupstore": {pkg: "backupstore", packages: 819, modules: []string{"cloud.google.com/go/storage", "gocloud.dev"}},
		"gone":        {pkg: "gone", packages: 1},
	}
	costs := []cost{
		{pkg: "backupstore", packages: 400, modules: []string{"gocloud.dev"}},
		{pkg: "backupstore/s3store", packages: 500, modules: []string{"gocloud.dev"}},
	}
	got := strings.Join(compare(costs, budget), "\n")
	for _, want := range []string{
		"backupstore no longer pulls in 1 modules of its budget (tighten it):\n\t- cloud.google.com/go/storage",
		"backupstore compiles 400 packages, 419 fewer than its budget of 819 (tighten it)",
		"backupstore/s3store: a public package without a budget: it pulls in 1 modules, 500 packages",
		"gone: in the budget, but not a public package of the module any more",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("compare says\n%s\n\nwant it to say\n%s", got, want)
		}
	}
	if problems := compare(costs[:1], map[string]cost{"backupstore": costs[0]}); len(problems) != 0 {
		t.Errorf("a package at its budget: %v", problems)
	}
}
