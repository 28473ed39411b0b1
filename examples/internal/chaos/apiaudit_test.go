package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The API server's audit log records every delete, including ones made
// while the API server restarts between them, with the object's UID and
// when the deletion took effect.
func TestReadDeleteRequests(t *testing.T) {
	k := testenv.StartIsolatedKubernetes(t)
	ctx := context.Background()
	cms := k.Client.CoreV1().ConfigMaps(k.Namespace)
	uids := map[string]types.UID{}
	for _, name := range []string{"one", "two", "three"} {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"set": "b"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = cm.UID
	}
	claim, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Finalizers: []string{"test/keep"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{}); err == nil {
		t.Fatal("a second delete of one succeeded")
	}
	if err := k.APIServer.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "set=b"}); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	reqs, err := ReadDeleteRequests(k.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]DeleteRequest{}
	for _, r := range reqs {
		if r.Namespace != k.Namespace {
			continue
		}
		if _, dup := got[r.Name]; dup {
			t.Errorf("%s deleted twice: the failed second delete was counted", r.Name)
		}
		got[r.Name] = r
	}
	uids["data"] = claim.UID
	for name, uid := range uids {
		r, ok := got[name]
		switch {
		case !ok:
			t.Errorf("no delete of %s in the audit log; got %v", name, got)
		case r.UID != uid:
			t.Errorf("delete of %s: uid %q, want %q", name, r.UID, uid)
		case r.Received.Before(before.Add(-time.Second)) || r.Completed.After(after.Add(time.Second)) || r.Completed.Before(r.Received):
			t.Errorf("delete of %s: received %s, completed %s; the deletes ran between %s and %s", name, r.Received, r.Completed, before, after)
		case r.User == "" || r.UserAgent == "":
			t.Errorf("delete of %s: user %q, user agent %q; want both", name, r.User, r.UserAgent)
		}
	}
	if r := got["data"]; r.Resource != "persistentvolumeclaims" || len(r.Object) == 0 {
		t.Errorf("delete of the claim: resource %q, object %d bytes", r.Resource, len(r.Object))
	}
	if r := got["two"]; r.Resource != "configmaps" {
		t.Errorf("deletecollection: resource %q", r.Resource)
	}
}

// A kill can tear the last line of the log: it is ignored, while a bad
// line before the last is an error.
func TestReadDeleteRequestsTornLine(t *testing.T) {
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/generic-garbage-collector","objectRef":{"resource":"configmaps","namespace":"ns","name":"a","apiVersion":"v1"},"responseStatus":{"code":200},"responseObject":{"kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u-1"}},"requestReceivedTimestamp":"2026-11-24T10:00:00.000001Z","stageTimestamp":"2026-11-24T10:00:00.002000Z"}`
	dir := t.TempDir()
	torn := dir + "/torn.log"
	if err := os.WriteFile(torn, []byte(line+"\n"+line[:80]), 0o600); err != nil {
		t.Fatal(err)
	}
	reqs, err := ReadDeleteRequests(torn)
	if err != nil || len(reqs) != 1 || reqs[0].UID != "u-1" || reqs[0].User != "admin" || !strings.HasSuffix(reqs[0].UserAgent, "/generic-garbage-collector") {
		t.Fatalf("torn last line: %+v, %v; want one delete of a, uid u-1", reqs, err)
	}
	bad := dir + "/bad.log"
	if err := os.WriteFile(bad, []byte(line[:80]+"\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDeleteRequests(bad); err == nil {
		t.Fatal("a bad line before the last was not an error")
	}
}

// A request whose outcome is unknown is reported as Uncertain: one the API
// server answered with a server error (its client was cut off while etcd
// deleted the object), and one it received but never completed (it was
// killed). A refused one is not reported; a received and completed one is
// reported once, as certain.
func TestReadDeleteRequestsUncertain(t *testing.T) {
	event := func(id, stage, name string, code int) string {
		status := ""
		if code != 0 {
			status = fmt.Sprintf(`,"responseStatus":{"code":%d}`, code)
		}
		return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":%q,"stage":%q,"verb":"delete","user":{"username":"admin"},"objectRef":{"resource":"configmaps","namespace":"ns","name":%q,"apiVersion":"v1"}%s,"requestReceivedTimestamp":"2026-11-24T10:00:00.000001Z","stageTimestamp":"2026-11-24T10:00:00.002000Z"}`,
			id, stage, name, status)
	}
	lines := []string{
		event("1", "RequestReceived", "done", 0), event("1", "ResponseComplete", "done", 200),
		event("2", "RequestReceived", "cut-off", 0), event("2", "ResponseComplete", "cut-off", 500),
		event("3", "RequestReceived", "refused", 0), event("3", "ResponseComplete", "refused", 409),
		event("4", "RequestReceived", "killed", 0),
	}
	path := t.TempDir() + "/audit.log"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reqs, err := ReadDeleteRequests(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]DeleteRequest{}
	for _, r := range reqs {
		if _, dup := got[r.Name]; dup {
			t.Errorf("%s reported twice", r.Name)
		}
		got[r.Name] = r
	}
	for name, uncertain := range map[string]bool{"done": false, "cut-off": true, "killed": true} {
		r, ok := got[name]
		if !ok || r.Uncertain != uncertain {
			t.Errorf("%s: reported %v, uncertain %v; want reported, uncertain %v", name, ok, r.Uncertain, uncertain)
		}
	}
	if r := got["killed"]; !r.Completed.IsZero() || r.Received.IsZero() {
		t.Errorf("the request never completed: received %s, completed %s; want a receipt and no completion", r.Received, r.Completed)
	}
	if _, ok := got["refused"]; ok {
		t.Error("a refused request (409) was reported")
	}
}
