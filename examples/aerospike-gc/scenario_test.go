package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/scenario.golden")

// The scenario's timeline is deterministic, and is what the README shows.
func TestScenarioGolden(t *testing.T) {
	var out bytes.Buffer
	if err := runScenario(&out); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "scenario.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("timeline differs from %s (rerun with -update after checking it):\n%s", golden, out.String())
	}
}
