package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// KWOK forgets a delete that the API server refused for anything but an
// overload; the nodes' sync makes it delete the pod again once the
// refusal is over, as a kubelet's next sync would. Here an admission
// policy refuses the fake kubelet's delete of a terminating pod until the
// test removes it: the pod must go after that without anything touching
// it but the sync.
func TestSyncRetriesTheDeleteKWOKForgot(t *testing.T) {
	t.Parallel()
	k := testenv.StartKubernetes(t)
	nodes := k.StartNodes(t, nil)
	ctx := t.Context()
	pods := k.Client.CoreV1().Pods(k.Namespace)

	// While bound, the policy refuses the delete of a pod of the test's
	// namespace that is already terminating (the kubelet's), and lets the
	// first one (the test's, which starts the grace period) through.
	name := "refuse-kubelet-delete-" + k.Namespace
	adm := k.Client.AdmissionregistrationV1()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: k.Namespace}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(oldObject.metadata.deletionTimestamp)",
				Message:    "refused by the test: the pod is terminating",
			}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// A probe tells when the API server applies the policy: a pod held
	// Terminating by a finalizer (which KWOK and the sync leave alone),
	// whose second delete, dry run, the policy refuses.
	probe := podWith("probe", 0)
	probe.Finalizers = []string{"testenv.groundskeeper.io/test-hold"}
	if _, err := pods.Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pods.Patch(context.Background(), "probe", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if err := pods.Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	policyApplies := func(want bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := pods.Delete(ctx, "probe", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			refused := apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
			if err != nil && !refused {
				return false, err
			}
			return refused == want, nil
		})
		if err != nil {
			t.Fatalf("the admission policy's refusal is not %v within a minute: %v", want, err)
		}
	}
	policyApplies(true)

	if _, err := pods.Create(ctx, podWith("db-0", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, k, "db-0", time.Minute, "Running", running)
	if err := pods.Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// KWOK's delete, at the deletionTimestamp, is refused, and it says so
	// in its log.
	kubelet := nodes.Items[0].Kubelet
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(kubelet.LogPath())
		return strings.Contains(string(log), "failed to delete pod db-0"), err
	})
	if err != nil {
		t.Fatalf("KWOK did not log its refused delete of db-0 within a minute (%v); log %s", err, kubelet.LogPath())
	}
	if _, err := pods.Get(ctx, "db-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("db-0 after KWOK's refused delete: %v; want it Terminating", err)
	}

	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	policyApplies(false)
	start := time.Now()
	waitPod(t, k, "db-0", time.Minute, "gone once the refusal is over", gone)
	t.Logf("db-0 gone %s after the policy stopped refusing", time.Since(start).Round(100*time.Millisecond))
}
