// Package kubecmd holds what every example operator's command does the same
// way: the Kubernetes-convention flags (--kubeconfig, --namespace,
// --zap-log-level, --zap-devel, --leader-elect), the choice between a
// cluster and the simulated scenario, a zap logger behind logr, and
// client-go leader election on a Lease.
package kubecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Flags are the common flags of an example command.
type Flags struct {
	Kubeconfig  string
	Namespace   string
	LogLevel    string
	Devel       bool
	LeaderElect bool
}

// Register adds the flags to fs. leaderElectHelp describes --leader-elect
// for this command; empty leaves the flag out.
func (f *Flags) Register(fs *flag.FlagSet, leaderElectHelp string) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; without it, and outside a cluster, the simulated scenario runs")
	fs.StringVar(&f.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace to work in (default: $POD_NAMESPACE, else the kubeconfig's)")
	fs.StringVar(&f.LogLevel, "zap-log-level", "info", "log verbosity: debug, info, error, or an integer N > 0 for logr V(N)")
	fs.BoolVar(&f.Devel, "zap-devel", false, "human-readable console logs instead of JSON")
	if leaderElectHelp != "" {
		fs.BoolVar(&f.LeaderElect, "leader-elect", false, leaderElectHelp)
	}
}

// RestConfig returns the cluster configuration from --kubeconfig, else the
// in-cluster one, and fills in Namespace if it is empty. It returns nil, nil
// when there is neither: the command runs its simulated scenario then.
func (f *Flags) RestConfig() (*rest.Config, error) {
	if f.Kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, nil
		}
		if f.Namespace == "" {
			f.Namespace = "default"
		}
		return cfg, err
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.Kubeconfig}, &clientcmd.ConfigOverrides{})
	if f.Namespace == "" {
		ns, _, err := loader.Namespace()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %q: %w", f.Kubeconfig, err)
		}
		f.Namespace = ns
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", f.Kubeconfig, err)
	}
	return cfg, nil
}

// Logger builds the logr.Logger the packages log through, from zap, with
// controller-runtime's --zap-log-level convention.
func (f *Flags) Logger() (logr.Logger, error) {
	var l zapcore.Level
	if n, err := strconv.Atoi(f.LogLevel); err == nil && n > 0 {
		l = zapcore.Level(-n)
	} else if err := l.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return logr.Logger{}, fmt.Errorf("--zap-log-level %q: %w", f.LogLevel, err)
	}
	cfg := zap.NewProductionConfig()
	if f.Devel {
		cfg = zap.NewDevelopmentConfig()
	}
	cfg.Level = zap.NewAtomicLevelAt(l)
	z, err := cfg.Build()
	if err != nil {
		return logr.Logger{}, err
	}
	return zapr.NewLogger(z), nil
}

// Leading runs fn while this replica leads, through client-go's leader
// election on the Lease namespace/name, and returns fn's error. When fn
// returns, the replica steps down (the Lease is released). Leading returns
// an error if leadership is lost before ctx ends; it returns only after fn
// has returned.
func Leading(ctx context.Context, cfg *rest.Config, namespace, name string, fn func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	// client-go runs OnStartedLeading on its own goroutine and keeps
	// renewing until its context ends: end it when fn returns, and hand
	// fn's error over a channel.
	electionCtx, stepDown := context.WithCancel(ctx)
	defer stepDown()
	started := make(chan struct{})
	done := make(chan error, 1)
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s_%d", host, os.Getpid())},
		},
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				close(started)
				done <- fn(ctx)
				stepDown()
			},
			OnStoppedLeading: func() {},
		},
	})
	select {
	case <-started:
	default:
		return nil // ctx ended before this replica led
	}
	runErr := <-done
	if runErr == nil && ctx.Err() == nil {
		runErr = errors.New("leader election lost")
	}
	return runErr
}
