package crt_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// crt.SecretGetter is backupstore.SecretGetter's method set: either is the
// other, so what crt.Secrets returns goes to backupstore as it did when
// Secrets returned a backupstore.SecretGetter.
var (
	_ backupstore.SecretGetter = crt.SecretGetter(nil)
	_ crt.SecretGetter         = backupstore.SecretGetter(nil)
)

// LoadCredentials over a controller-runtime reader: a missing Secret is
// ErrSecretNotFound, as over client-go, and a present one is read.
func TestLoadCredentialsOverAReader(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	r, err := client.New(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	secrets := crt.Secrets(r)
	if _, err := backupstore.LoadCredentials(ctx, secrets, env.Namespace, "absent", "s3"); !errors.Is(err, backupstore.ErrSecretNotFound) {
		t.Errorf("missing Secret: %v, want ErrSecretNotFound", err)
	}
	_, err = env.Client.CoreV1().Secrets(env.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3"},
		StringData: map[string]string{backupstore.SecretKeyAccessKeyID: "id", backupstore.SecretKeySecretAccessKey: "key"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := backupstore.LoadCredentials(ctx, secrets, env.Namespace, "s3", "s3")
	if err != nil || creds == nil || creds.AccessKeyID != "id" {
		t.Errorf("LoadCredentials = %+v, %v; want access key id \"id\"", creds, err)
	}
}
