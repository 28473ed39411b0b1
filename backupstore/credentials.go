package backupstore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Keys of the credentials Secret, per provider. They are the keys Gardener's
// provider extensions read from a BackupBucket's Secret, so the Secret of an
// existing Gardener landscape can be used as it is.
const (
	// S3 (s3:// URLs).
	SecretKeyAccessKeyID     = "accessKeyID"      // required
	SecretKeySecretAccessKey = "secretAccessKey"  // required
	SecretKeyRegion          = "region"           // optional; the URL's region= wins
	SecretKeyEndpoint        = "endpoint"         // optional; the URL's endpoint= wins
	SecretKeyS3PathStyle     = "s3ForcePathStyle" // optional, "true" or "false"

	// GCS (gs:// URLs): a service account key in JSON.
	SecretKeyServiceAccountJSON = "serviceaccount.json" // required

	// Azure Blob (azblob:// URLs): a storage account and its shared key.
	SecretKeyStorageAccount = "storageAccount" // required
	SecretKeyStorageKey     = "storageKey"     // required
)

var (
	// ErrSecretNotFound: the credentials Secret does not exist. A controller
	// should warn and not delete anything (aerospike-operator's rule).
	ErrSecretNotFound = errclass.Retryable("backupstore: credentials secret not found")
	// ErrSecretKeyMissing: the Secret exists but lacks a required key, or
	// holds an empty value for it.
	ErrSecretKeyMissing = errclass.Terminal("backupstore: credentials secret lacks a required key")
	// ErrUnsupportedScheme: the URL scheme is not one of s3, gs, azblob,
	// file, mem.
	ErrUnsupportedScheme = errclass.Terminal("backupstore: unsupported URL scheme")
)

// SecretError says which Secret (and which key of it) could not be used. It
// never carries a credential value. It unwraps to ErrSecretNotFound,
// ErrSecretKeyMissing or the API error that prevented reading the Secret.
type SecretError struct {
	Namespace, Name string
	// Key is the missing key, empty when the whole Secret is the problem.
	Key string
	Err error
}

func (e *SecretError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("backupstore: secret %s/%s: key %q: %v", e.Namespace, e.Name, e.Key, e.Err)
	}
	return fmt.Sprintf("backupstore: secret %s/%s: %v", e.Namespace, e.Name, e.Err)
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*SecretError) Terminal() bool { return false }

func (e *SecretError) Unwrap() error { return e.Err }

// Credentials hold what a provider client needs to reach a bucket. Only the
// fields of the URL's provider are used. Credentials never print their
// values: String, GoString and the fmt verbs show only which fields are set.
type Credentials struct {
	// S3.
	AccessKeyID, SecretAccessKey string
	Region, Endpoint             string
	// S3PathStyle is the Secret's s3ForcePathStyle.
	S3PathStyle bool
	// GCS: a service account key file.
	ServiceAccountJSON []byte
	// Azure Blob: account and shared key.
	StorageAccount, StorageKey string
}

// String redacts every value. The methods have value receivers so that a
// copy of Credentials prints redacted too.
func (c Credentials) String() string {
	set := func(b bool) string {
		if b {
			return "set"
		}
		return "unset"
	}
	return fmt.Sprintf("backupstore.Credentials{s3:%s gcs:%s azure:%s}",
		set(c.AccessKeyID != ""), set(len(c.ServiceAccountJSON) > 0), set(c.StorageKey != ""))
}

// GoString redacts every value, also for %#v.
func (c Credentials) GoString() string { return c.String() }

// Format redacts every value whatever the verb (%v, %+v, %#v, %s, %q).
func (c Credentials) Format(f fmt.State, verb rune) { fmt.Fprint(f, c.String()) }

// CredentialsFromSecretData picks the keys of scheme's provider out of a
// Secret's data. The file and mem schemes need no credentials and give nil.
// namespace and name only label errors.
func CredentialsFromSecretData(scheme, namespace, name string, data map[string][]byte) (*Credentials, error) {
	need := func(key string) ([]byte, error) {
		v := data[key]
		if len(v) == 0 {
			return nil, &SecretError{Namespace: namespace, Name: name, Key: key, Err: ErrSecretKeyMissing}
		}
		return v, nil
	}
	c := &Credentials{}
	switch scheme {
	case "s3":
		id, err := need(SecretKeyAccessKeyID)
		if err != nil {
			return nil, err
		}
		secret, err := need(SecretKeySecretAccessKey)
		if err != nil {
			return nil, err
		}
		c.AccessKeyID, c.SecretAccessKey = string(id), string(secret)
		c.Region, c.Endpoint = string(data[SecretKeyRegion]), string(data[SecretKeyEndpoint])
		c.S3PathStyle = string(data[SecretKeyS3PathStyle]) == "true"
	case "gs":
		sa, err := need(SecretKeyServiceAccountJSON)
		if err != nil {
			return nil, err
		}
		c.ServiceAccountJSON = append([]byte(nil), sa...)
	case "azblob":
		acct, err := need(SecretKeyStorageAccount)
		if err != nil {
			return nil, err
		}
		key, err := need(SecretKeyStorageKey)
		if err != nil {
			return nil, err
		}
		c.StorageAccount, c.StorageKey = string(acct), string(key)
	case "file", "mem":
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: %w %q", ErrInvalidConfig, ErrUnsupportedScheme, scheme)
	}
	return c, nil
}

// SecretGetter reads one Secret from the API server: the one call
// LoadCredentials makes. SecretsFrom adapts a client-go clientset, and
// crt.Secrets a controller-runtime reader. Implementations return the API
// server's errors with their type (apierrors.IsNotFound works on them).
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// SecretsFrom returns the SecretGetter of a client-go clientset:
// backupstore.SecretsFrom(clientset.CoreV1()).
func SecretsFrom(c corev1client.SecretsGetter) SecretGetter { return clientGoSecrets{c} }

type clientGoSecrets struct{ c corev1client.SecretsGetter }

func (g clientGoSecrets) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return g.c.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// LoadCredentials reads the Secret namespace/name and returns the
// credentials for scheme ("s3", "gs", "azblob"; nil for "file" and "mem").
// A missing Secret gives a *SecretError that is ErrSecretNotFound; a missing
// or empty key gives one that is ErrSecretKeyMissing and names the key. Other
// API errors are wrapped in a *SecretError as they are (test them with
// k8s.io/apimachinery/pkg/api/errors: apierrors.IsForbidden works on what
// LoadCredentials returns).
func LoadCredentials(ctx context.Context, secrets SecretGetter, namespace, name, scheme string) (*Credentials, error) {
	switch scheme {
	case "file", "mem":
		return nil, nil
	case "s3", "gs", "azblob":
	default:
		return nil, fmt.Errorf("%w: %w %q", ErrInvalidConfig, ErrUnsupportedScheme, scheme)
	}
	s, err := secrets.GetSecret(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, &SecretError{Namespace: namespace, Name: name, Err: ErrSecretNotFound}
	}
	if err != nil {
		return nil, &SecretError{Namespace: namespace, Name: name, Err: err}
	}
	return CredentialsFromSecretData(scheme, namespace, name, s.Data)
}
