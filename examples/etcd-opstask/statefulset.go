// Members over the StatefulSet that runs an etcd's pods, as etcd-druid
// runs them: what a real operator gives a recovery from a loss of quorum.

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// The environment variables of the etcd pods that the recovery sets in the
// StatefulSet's pod template: etcd's own for its initial cluster, and the
// bucket key of the snapshot the pod's init container restores into an
// empty volume.
const (
	envInitialCluster      = "ETCD_INITIAL_CLUSTER"
	envInitialClusterState = "ETCD_INITIAL_CLUSTER_STATE"
	envRestoreSnapshot     = "ETCD_RESTORE_SNAPSHOT"
)

// statefulSetMembers runs the members of one etcd through its StatefulSet.
// Member i is the pod <Name>-<i>, its data the claim <Claim>-<Name>-<i>,
// its URLs http://<Name>-<i>.<Service>.<Namespace>.svc:2380 (peer) and
// :2379 (client). The StatefulSet must have podManagementPolicy Parallel
// (OrderedReady scales neither up nor down past a member that is not
// ready, as every member of a cluster without quorum is) and
// updateStrategy OnDelete (Start changes the pod template for the member
// it starts; a rolling update would restart the members that run). Its
// etcd container takes its initial cluster from etcd's environment
// variables, and its init container restores the snapshot named in
// ETCD_RESTORE_SNAPSHOT from the backup bucket into an empty volume (as
// etcd-backup-restore does): that container is not part of this example.
type statefulSetMembers struct {
	Client                   kubernetes.Interface
	Namespace, Name, Service string
	Claim                    string // the volume claim template of the data
	Container                string // the etcd container
	Size                     int    // the members of the cluster, not the current replicas
	Backups                  func(context.Context) (*blob.Bucket, error)
}

var _ Members = (*statefulSetMembers)(nil)

func (s *statefulSetMembers) List() []Member {
	out := make([]Member, s.Size)
	for i := range out {
		name := s.Name + "-" + strconv.Itoa(i)
		host := fmt.Sprintf("http://%s.%s.%s.svc", name, s.Service, s.Namespace)
		out[i] = Member{Name: name, PeerURL: host + ":2380", ClientURL: host + ":2379"}
	}
	return out
}

func (s *statefulSetMembers) ordinal(name string) (int, error) {
	i, err := strconv.Atoi(strings.TrimPrefix(name, s.Name+"-"))
	if err != nil || !strings.HasPrefix(name, s.Name+"-") || i < 0 || i >= s.Size {
		return 0, fmt.Errorf("member %q: not one of StatefulSet %s/%s's %d members", name, s.Namespace, s.Name, s.Size)
	}
	return i, nil
}

// Stop scales the StatefulSet down to the member's ordinal and waits until
// the pods from it on are gone. A StatefulSet scales from its end, so the
// members after it stop too: the recovery stops them all, or one it has
// not started yet, after which none is started.
func (s *statefulSetMembers) Stop(ctx context.Context, name string) error {
	i, err := s.ordinal(name)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(sts *appsv1.StatefulSet) error {
		if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) > i {
			sts.Spec.Replicas = ptr.To(int32(i))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.poll(ctx, fmt.Sprintf("the pods of %s-%d to %s-%d are gone", s.Name, i, s.Name, s.Size-1), func() (bool, error) {
		for j := i; j < s.Size; j++ {
			if gone, err := s.podGone(ctx, j); !gone || err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// Wipe deletes the member's claim once its pod is gone (it refuses while
// the pod exists), with the claim's UID and resourceVersion as read as
// preconditions, and waits until the claim is gone, so that the member's
// next pod gets a new, empty one from the claim template.
func (s *statefulSetMembers) Wipe(ctx context.Context, name string) error {
	i, err := s.ordinal(name)
	if err != nil {
		return err
	}
	if gone, err := s.podGone(ctx, i); err != nil {
		return err
	} else if !gone {
		return fmt.Errorf("wipe %s: its pod exists: stop it first", name)
	}
	claims := s.Client.CoreV1().PersistentVolumeClaims(s.Namespace)
	claim := s.Claim + "-" + name
	pvc, err := claims.Get(ctx, claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.DeletionTimestamp == nil {
		pre := metav1.Preconditions{UID: &pvc.UID, ResourceVersion: &pvc.ResourceVersion}
		if err := claims.Delete(ctx, claim, metav1.DeleteOptions{Preconditions: &pre}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("wipe %s: delete claim %s (uid %s, resourceVersion %s): %w", name, claim, pvc.UID, pvc.ResourceVersion, err)
		}
	}
	return s.poll(ctx, "claim "+claim+" is gone", func() (bool, error) {
		_, err := claims.Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// Restore uploads the snapshot into the backup bucket and names it in the
// pod template, for the init container of the member's next pod (the
// first one the StatefulSet creates: Start scales to it next). The key
// is the member's whole identity, not its name alone: the StatefulSet's
// namespace, name and UID, and the member (restoreKey). Two clusters of
// one StatefulSet name in two namespaces, or one deleted and created
// again, may share a backup bucket: with the member's name alone, the
// restore of one would write over the other's snapshot before its init
// container read it, and that member would start with the other
// cluster's data. The pod template is written only while the StatefulSet
// is still the one whose UID the key names.
func (s *statefulSetMembers) Restore(ctx context.Context, name, snapshotPath string) error {
	if _, err := s.ordinal(name); err != nil {
		return err
	}
	sts, err := s.Client.AppsV1().StatefulSets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("restore %s: %w", name, err)
	}
	b, err := s.Backups(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	key := restoreKey(sts, name)
	if err := uploadFile(ctx, b, key, snapshotPath, nil); err != nil {
		return fmt.Errorf("restore %s: %w", name, err)
	}
	return s.update(ctx, func(now *appsv1.StatefulSet) error {
		if now.UID != sts.UID {
			return fmt.Errorf("restore %s: the StatefulSet was replaced (UID %s, the snapshot %s was uploaded for UID %s)", name, now.UID, key, sts.UID)
		}
		return setEnv(now, s.Container, envRestoreSnapshot, key)
	})
}

// restoreKey is the bucket key of the snapshot restored into member of
// sts: "Restore-<namespace>.<name>-<uid>-<member>.db" (a namespace holds
// no dot). It is not a snapshot name: compaction and retention leave it.
func restoreKey(sts *appsv1.StatefulSet, member string) string {
	return fmt.Sprintf("Restore-%s.%s-%s-%s.db", sts.Namespace, sts.Name, sts.UID, member)
}

// Start sets the member's initial cluster and state in the pod template
// (a member that joins an existing cluster restores nothing) and scales the
// StatefulSet up to the member, without waiting for its pod.
func (s *statefulSetMembers) Start(ctx context.Context, name, initialCluster, state string) error {
	i, err := s.ordinal(name)
	if err != nil {
		return err
	}
	return s.update(ctx, func(sts *appsv1.StatefulSet) error {
		if err := setEnv(sts, s.Container, envInitialCluster, initialCluster); err != nil {
			return err
		}
		if err := setEnv(sts, s.Container, envInitialClusterState, state); err != nil {
			return err
		}
		if state == "existing" {
			if err := setEnv(sts, s.Container, envRestoreSnapshot, ""); err != nil {
				return err
			}
		}
		if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) < i+1 {
			sts.Spec.Replicas = ptr.To(int32(i + 1))
		}
		return nil
	})
}

// update reads the StatefulSet, checks that it can be driven member by
// member, changes it and writes it with the resourceVersion read, again
// on a conflict.
func (s *statefulSetMembers) update(ctx context.Context, change func(*appsv1.StatefulSet) error) error {
	sets := s.Client.AppsV1().StatefulSets(s.Namespace)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		sts, err := sets.Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p := sts.Spec.PodManagementPolicy; p != appsv1.ParallelPodManagement {
			return fmt.Errorf("StatefulSet %s/%s: spec.podManagementPolicy %q, want Parallel", s.Namespace, s.Name, p)
		}
		if u := sts.Spec.UpdateStrategy.Type; u != appsv1.OnDeleteStatefulSetStrategyType {
			return fmt.Errorf("StatefulSet %s/%s: spec.updateStrategy.type %q, want OnDelete", s.Namespace, s.Name, u)
		}
		if err := change(sts); err != nil {
			return fmt.Errorf("StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		_, err = sets.Update(ctx, sts, metav1.UpdateOptions{})
		return err
	})
}

func (s *statefulSetMembers) podGone(ctx context.Context, i int) (bool, error) {
	_, err := s.Client.CoreV1().Pods(s.Namespace).Get(ctx, s.Name+"-"+strconv.Itoa(i), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// poll calls done every 200ms until it returns true, for at most two
// minutes.
func (s *statefulSetMembers) poll(ctx context.Context, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		ok, err := done()
		if ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("StatefulSet %s/%s: waiting until %s: %w", s.Namespace, s.Name, what, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// setEnv sets the variable name of the container in the pod template to
// value, or removes it when value is empty.
func setEnv(sts *appsv1.StatefulSet, container, name, value string) error {
	cs := sts.Spec.Template.Spec.Containers
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return fmt.Errorf("no container %q in the pod template", container)
	}
	env := slices.DeleteFunc(cs[i].Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if value != "" {
		env = append(env, corev1.EnvVar{Name: name, Value: value})
	}
	cs[i].Env = env
	return nil
}
