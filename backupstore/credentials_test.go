package backupstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestLoadCredentialsFromSecret(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	secrets := backupstore.SecretsFrom(k.Client.CoreV1())
	create := func(name string, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Namespace}, StringData: data}
		if _, err := k.Client.CoreV1().Secrets(k.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const secretValue = "super-secret-value-1234"
	create("s3-no-secret-key", map[string]string{"accessKeyID": "AKIA-visible-id", "region": "eu-west-1"})
	create("azure-empty-key", map[string]string{"storageAccount": "acct", "storageKey": ""})
	create("gcs-ok", map[string]string{"serviceaccount.json": `{"type":"service_account","project_id":"p","client_email":"a@p.iam.gserviceaccount.com"}`})
	create("s3-wrong", map[string]string{"accessKeyID": testenv.S3AccessKeyID, "secretAccessKey": secretValue, "region": testenv.S3Region})

	t.Run("missing secret", func(t *testing.T) {
		for _, scheme := range []string{"s3", "gs", "azblob"} {
			c, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, "does-not-exist", scheme)
			if !errors.Is(err, backupstore.ErrSecretNotFound) || c != nil {
				t.Errorf("%s: LoadCredentials = %v, %v; want ErrSecretNotFound", scheme, c, err)
			}
			var se *backupstore.SecretError
			if !errors.As(err, &se) || se.Namespace != k.Namespace || se.Name != "does-not-exist" {
				t.Errorf("%s: error %v does not name the secret", scheme, err)
			}
		}
	})
	t.Run("missing key", func(t *testing.T) {
		for _, tc := range []struct{ name, scheme, key string }{
			{"s3-no-secret-key", "s3", "secretAccessKey"},
			{"azure-empty-key", "azblob", "storageKey"},
			{"s3-no-secret-key", "gs", "serviceaccount.json"},
		} {
			_, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, tc.name, tc.scheme)
			var se *backupstore.SecretError
			if !errors.Is(err, backupstore.ErrSecretKeyMissing) || !errors.As(err, &se) || se.Key != tc.key {
				t.Errorf("%s/%s: err = %v; want ErrSecretKeyMissing naming %q", tc.name, tc.scheme, err, tc.key)
			}
			if errors.Is(err, backupstore.ErrSecretNotFound) {
				t.Errorf("%s: a missing key is not a missing secret", tc.name)
			}
			if strings.Contains(err.Error(), "AKIA-visible-id") {
				t.Errorf("error quotes a secret value: %v", err)
			}
		}
	})
	t.Run("no credentials for file and mem", func(t *testing.T) {
		for _, scheme := range []string{"file", "mem"} {
			c, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, "does-not-exist", scheme)
			if c != nil || err != nil {
				t.Errorf("%s: %v, %v; want nil, nil", scheme, c, err)
			}
		}
		if _, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, "gcs-ok", "ftp"); !errors.Is(err, backupstore.ErrUnsupportedScheme) {
			t.Errorf("ftp: %v; want ErrUnsupportedScheme", err)
		}
	})
	t.Run("credentials never print", func(t *testing.T) {
		c, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, "s3-wrong", "s3")
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			if out := fmt.Sprintf(verb, c); strings.Contains(out, secretValue) {
				t.Errorf("%s prints the secret: %s", verb, out)
			}
		}
	})
	t.Run("wrong secret against MinIO", func(t *testing.T) {
		s := testenv.S3(t)
		c, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, "s3-wrong", "s3")
		if err != nil {
			t.Fatal(err)
		}
		b := openURL(t, s.URL, c)
		_, err = backupstore.DeletePrefix(ctx, b, "backups/x/", &backupstore.DeleteOptions{Retry: backupstore.Retry{Attempts: 2}})
		if err == nil {
			t.Fatal("DeletePrefix with a wrong secret succeeded")
		}
		if strings.Contains(err.Error(), secretValue) {
			t.Errorf("error quotes the secret: %v", err)
		}
		t.Logf("wrong secret: %v", err)
	})
	t.Run("secret opens the bucket", func(t *testing.T) {
		for _, st := range allStores[:3] {
			t.Run(st.name, func(t *testing.T) {
				s := st.open(t)
				data := map[string]string{}
				switch s.Scheme {
				case "s3":
					data = map[string]string{"accessKeyID": testenv.S3AccessKeyID, "secretAccessKey": testenv.S3SecretAccessKey, "region": testenv.S3Region}
				case "gs":
					data = map[string]string{"serviceaccount.json": `{"type":"service_account","project_id":"p","client_email":"a@p.iam.gserviceaccount.com"}`}
				case "azblob":
					data = map[string]string{"storageAccount": testenv.AzureAccount, "storageKey": testenv.AzureAccountKey}
				}
				name := "creds-" + s.Scheme
				create(name, data)
				c, err := backupstore.LoadCredentials(ctx, secrets, k.Namespace, name, s.Scheme)
				if err != nil {
					t.Fatal(err)
				}
				b := openURL(t, s.URL, c)
				if err := b.WriteAll(ctx, "backups/e/1", []byte("hello"), nil); err != nil {
					t.Fatalf("write with secret credentials: %v", err)
				}
				res, err := backupstore.DeletePrefix(ctx, b, "backups/e/", nil)
				if err != nil || res.Deleted != 1 {
					t.Errorf("DeletePrefix: %+v, %v", res, err)
				}

				// prefix= puts every key under it.
				sep := "?"
				if strings.Contains(s.URL, "?") {
					sep = "&"
				}
				pb := openURL(t, s.URL+sep+"prefix=tenant-a/", c)
				if err := pb.WriteAll(ctx, "backups/e/2", []byte("hello"), nil); err != nil {
					t.Fatalf("write through prefix=: %v", err)
				}
				if got, err := b.ReadAll(ctx, "tenant-a/backups/e/2"); err != nil || string(got) != "hello" {
					t.Errorf("tenant-a/backups/e/2 through the unprefixed bucket: %q, %v", got, err)
				}
			})
		}
	})
}

func TestCredentialsPrintRedacted(t *testing.T) {
	c := &backupstore.Credentials{AccessKeyID: "id-1", SecretAccessKey: "secret-2", ServiceAccountJSON: []byte("json-3"), StorageKey: "key-4"}
	var nilCreds *backupstore.Credentials
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, v := range []any{c, *c, []any{c}, struct{ C *backupstore.Credentials }{c}, nilCreds} {
			out := fmt.Sprintf(verb, v)
			for _, secret := range []string{"id-1", "secret-2", "json-3", "key-4", "6a736f6e2d33"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s of %T prints %q: %s", verb, v, secret, out)
				}
			}
		}
	}
}
