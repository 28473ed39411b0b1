package locks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
)

// ConfigMaps returns the kubelock.Client of a controller-runtime manager:
// the lock's ConfigMap is read through apiReader (mgr.GetAPIReader()), since
// kubelock's transactions start from a read of the API server, never a
// cache, and written through c (mgr.GetClient()).
//
//	backend, err := kubelock.New(kubelock.Config{
//		Client:    locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()),
//		Namespace: ns,
//		Name:      "my-operator-lock",
//	})
func ConfigMaps(c client.Writer, apiReader client.Reader) kubelock.Client {
	return configMaps{w: c, r: apiReader}
}

type configMaps struct {
	w client.Writer
	r client.Reader
}

func (c configMaps) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	if err := c.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		return nil, err
	}
	return &cm, nil
}

func (c configMaps) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	out := cm.DeepCopy()
	if err := c.w.Create(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c configMaps) UpdateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	out := cm.DeepCopy()
	if err := c.w.Update(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}
