package backups_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// PolicyOf reads the object a group names on the API server and parses its
// field; a bad group, a missing object and a bad policy are errors naming
// what is at fault.
func TestPolicyOf(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	for name, policy := range map[string]string{"good": "last=3,daily=7", "bad": "last=three"} {
		if _, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"retention": policy}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := client.New(k.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	policyOf := backups.PolicyOf[*corev1.ConfigMap](r, "data.retention", func(cm *corev1.ConfigMap) string { return cm.Data["retention"] })

	got, err := policyOf(ctx, k.Namespace+"/good")
	want, _ := retention.ParsePolicy("last=3,daily=7")
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("good: %v, %v; want %v", got, err, want)
	}
	_, err = policyOf(ctx, k.Namespace+"/bad")
	if !errors.Is(err, retention.ErrInvalidPolicy) || !strings.Contains(err.Error(), "data.retention of "+k.Namespace+"/bad") {
		t.Errorf("bad: %v; want ErrInvalidPolicy naming data.retention of %s/bad", err, k.Namespace)
	}
	_, err = policyOf(ctx, k.Namespace+"/gone")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), k.Namespace+"/gone") {
		t.Errorf("gone: %v; want NotFound naming %s/gone", err, k.Namespace)
	}
	if _, err = policyOf(ctx, "good"); err == nil || !strings.Contains(err.Error(), `group "good" is not namespace/name`) {
		t.Errorf("a group without a namespace: %v", err)
	}
}
