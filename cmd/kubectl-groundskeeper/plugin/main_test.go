package plugin_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata with the output of the commands")

func TestMain(m *testing.M) { testenv.Main(m) }

type result struct {
	out, err string
	code     int
}

// run runs the command as a person would, with opts and args, and no
// terminal: stdin is empty.
func run(t *testing.T, opts plugin.Options, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Streams = &genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := plugin.Main(opts, args)
	t.Logf("$ kubectl groundskeeper %s\n%s%s(exit %d)", strings.Join(args, " "), out.String(), errOut.String(), code)
	return result{out.String(), errOut.String(), code}
}

// kube returns the kubectl flags that point the command at k's namespace.
func kube(k *testenv.Kubernetes, args ...string) []string {
	return append(args, "--kubeconfig", k.Kubeconfig, "-n", k.Namespace)
}

// golden compares got with testdata/name, after replacing the test's
// namespace, uids and resourceVersions with placeholders; -update
// rewrites the file.
func golden(t *testing.T, name, got string, k *testenv.Kubernetes) {
	t.Helper()
	if k != nil {
		got = strings.ReplaceAll(got, k.Namespace, "NAMESPACE")
	}
	got = uidRE.ReplaceAllString(got, "UID")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var uidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// oneLineError checks that r failed with exit code, one line on stderr
// that contains each of want, and no stack trace.
func oneLineError(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d", r.code, code)
	}
	if strings.Count(r.err, "\n") != 1 || !strings.HasPrefix(r.err, "error: ") {
		t.Errorf("stderr is not one line starting with \"error: \": %q", r.err)
	}
	if strings.Contains(r.err, "goroutine ") || strings.Contains(r.err, ".go:") {
		t.Errorf("stderr has a stack trace: %q", r.err)
	}
	for _, w := range want {
		if !strings.Contains(r.err, w) {
			t.Errorf("stderr %q does not name %q", r.err, w)
		}
	}
}
