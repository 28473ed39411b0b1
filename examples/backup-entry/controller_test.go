package main

import (
	"strings"
	"testing"
)

func TestFlagErrorsNameTheFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--deletion-grace-period", "-1d"},
		{"--deletion-grace-period", "30"},
		{"--kubeconfig", "/nonexistent/kubeconfig"},
	} {
		err := run(args)
		if err == nil {
			t.Errorf("run(%q): no error", args)
			continue
		}
		if flag := strings.TrimPrefix(args[0], "--"); !strings.Contains(err.Error(), flag) {
			t.Errorf("run(%q): %v; want the flag %s named", args, err, flag)
		}
	}
}
