package crt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretGetter reads one Secret: backupstore.SecretGetter's one method,
// declared here so that crt does not import backupstore (an operator that
// uses crt without backupstore then links no cloud SDK). A SecretGetter is
// a backupstore.SecretGetter, and the other way round.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Secrets returns the SecretGetter of a controller-runtime reader, for
// backupstore.LoadCredentials. Pass the manager's API reader
// (mgr.GetAPIReader()) unless the manager already caches Secrets: the
// manager's client would otherwise start an informer on every Secret of
// the namespaces it watches.
func Secrets(r client.Reader) SecretGetter { return secrets{r} }

type secrets struct{ r client.Reader }

func (s secrets) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var secret corev1.Secret
	if err := s.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		return nil, err
	}
	return &secret, nil
}
