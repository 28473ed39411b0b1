package backups

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrWriterRunning is returned by DeploymentWriter.Pause while pods of the
// Deployment are left: the migration's pause step is retried.
var ErrWriterRunning = errclass.Retryable("backups: the writer still has pods")

// DeploymentWriter is the writer of a migration (migrate.Hooks): a
// Deployment whose pods write the backups. Pause scales it to 0 and
// waits until its pods are gone; Switch puts the new location in its pod
// template; Resume scales it back to the replicas it had. Each is
// idempotent, as a migration's hooks must be: the replicas before the
// pause are kept in an annotation of the Deployment until Resume.
type DeploymentWriter struct {
	// Client updates the Deployment; Reader reads it and lists its pods
	// (the manager's API reader: the cache would watch every Deployment
	// and pod of the cluster). Required.
	Client client.Client
	Reader client.Reader
	// Deployment names the writer.
	Deployment client.ObjectKey
	// PausedAnnotation keeps the replicas before the pause;
	// LocationAnnotation, on the pod template, the writer's location
	// after Switch. Required.
	PausedAnnotation, LocationAnnotation string
}

// Hooks are w's pause, switch to location, and resume; DeleteLegacy is
// left to the Migration's default (or the caller).
func (w DeploymentWriter) Hooks(location string) migrate.Hooks {
	return migrate.Hooks{Pause: w.Pause, Switch: w.Switch(location), Resume: w.Resume}
}

func (w DeploymentWriter) get(ctx context.Context) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	if err := w.Reader.Get(ctx, w.Deployment, &d); err != nil {
		return nil, fmt.Errorf("writer Deployment %s: %w", w.Deployment, err)
	}
	return &d, nil
}

func (w DeploymentWriter) update(ctx context.Context, d *appsv1.Deployment) error {
	if err := w.Client.Update(ctx, d); err != nil {
		return fmt.Errorf("writer Deployment %s: %w", w.Deployment, err)
	}
	return nil
}

// Pause scales the Deployment to 0, recording its replicas first, and
// returns ErrWriterRunning while pods of its selector are left.
func (w DeploymentWriter) Pause(ctx context.Context) error {
	d, err := w.get(ctx)
	if err != nil {
		return err
	}
	if _, paused := d.Annotations[w.PausedAnnotation]; !paused {
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, w.PausedAnnotation, strconv.Itoa(int(replicas)))
		d.Spec.Replicas = new(int32)
		if err := w.update(ctx, d); err != nil {
			return err
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("writer Deployment %s: spec.selector: %w", w.Deployment, err)
	}
	var pods corev1.PodList
	if err := w.Reader.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("writer Deployment %s: list pods: %w", w.Deployment, err)
	}
	if n := len(pods.Items); n > 0 {
		return fmt.Errorf("%w: Deployment %s scaled to 0, %d pod(s) left (%s)", ErrWriterRunning, w.Deployment, n, pods.Items[0].Name)
	}
	return nil
}

// Switch returns the hook that sets the pod template's LocationAnnotation
// to location.
func (w DeploymentWriter) Switch(location string) func(context.Context) error {
	return func(ctx context.Context) error {
		d, err := w.get(ctx)
		if err != nil || d.Spec.Template.Annotations[w.LocationAnnotation] == location {
			return err
		}
		metav1.SetMetaDataAnnotation(&d.Spec.Template.ObjectMeta, w.LocationAnnotation, location)
		return w.update(ctx, d)
	}
}

// Resume scales the Deployment back to the replicas Pause recorded, and
// removes the record; without one it has nothing to do.
func (w DeploymentWriter) Resume(ctx context.Context) error {
	d, err := w.get(ctx)
	if err != nil {
		return err
	}
	v, paused := d.Annotations[w.PausedAnnotation]
	if !paused {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return fmt.Errorf("writer Deployment %s: annotation %s=%q: %w", w.Deployment, w.PausedAnnotation, v, err)
	}
	replicas := int32(n)
	d.Spec.Replicas = &replicas
	delete(d.Annotations, w.PausedAnnotation)
	return w.update(ctx, d)
}
