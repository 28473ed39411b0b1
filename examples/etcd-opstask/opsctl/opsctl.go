// Package opsctl is the command-line client of the etcd-opstask example
// (DEP-05's "CLI capabilities to operators"): it creates EtcdOpsTask
// resources, one sub-command per task kind, lists them, watches a task to
// completion, printing each change of its state, operation and errors, and
// approves the plan a task waits at (a quorum-loss recovery's recovery
// point). cmd/opstask is its main package.
//
//	opstask create snapshot --etcd main --type full
//	opstask create maintenance --etcd main --compaction --defragmentation
//	opstask create snapshot-compaction --etcd main
//	opstask create recover-quorum --etcd main [--allow-data-loss] [--skip-approval]
//	opstask approve NAME [--dry-run]
//	opstask create copy-backups --source S3:backups/main/ --source-secret s3 --target GCS:dr/main/ --target-secret gcs
//	opstask list
//	opstask wait NAME
//
// create waits for the task to finish unless --wait=false. The exit code is
// 0 when the task Succeeded (approve: when the task is approved), 1 when it
// Failed or was Rejected (or on any error), 2 on bad usage.
package opsctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/opstask/taskctl"
)

// Exit codes: taskctl's.
const (
	ExitSucceeded = taskctl.ExitSucceeded
	ExitFailed    = taskctl.ExitFailed
	ExitUsage     = taskctl.ExitUsage
)

const usage = `usage: opstask COMMAND [flags]

commands:
  create snapshot             --etcd NAME --type full|delta [--final]
  create maintenance          --etcd NAME [--compaction] [--defragmentation]
  create snapshot-compaction  --etcd NAME
  create recover-quorum       --etcd NAME [--allow-data-loss] [--skip-approval]
  create copy-backups         --source PROVIDER:CONTAINER[/PREFIX] --target PROVIDER:CONTAINER[/PREFIX]
                              [--source-secret S] [--target-secret S] [--max-backups N] [--max-backup-age DAYS]
  list
  wait NAME
  approve NAME [--dry-run]    show the plan a task waits at and approve it

Every command takes --kubeconfig (default $KUBECONFIG, else ~/.kube/config) and --namespace;
create takes --name, --ttl SECONDS, --wait (default true) and --timeout. Run a command with -h for its flags.
`

var errUsage = errors.New("usage")

// Run runs the CLI and returns its exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code, err := run(ctx, args, stdout)
	switch {
	case errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, usage)
		return ExitUsage
	case err != nil:
		fmt.Fprintln(stderr, "opstask:", err)
		return ExitFailed
	}
	return code
}

// command is a sub-command's flags and clients.
type command struct {
	fs      *flag.FlagSet
	kube    kubecmd.Flags
	tasks   taskctl.Tasks
	timeout time.Duration
}

func newCommand(name string) *command {
	c := &command{fs: flag.NewFlagSet("opstask "+name, flag.ContinueOnError)}
	c.kube.Register(c.fs, "")
	c.fs.Lookup("kubeconfig").Usage = "path to a kubeconfig (default $KUBECONFIG, else ~/.kube/config; in a pod, the in-cluster config)"
	c.fs.DurationVar(&c.timeout, "timeout", 15*time.Minute, "how long to wait for the task to finish")
	return c
}

// parse parses args and connects to the cluster.
func (c *command) parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	return c.connect()
}

// parseName parses args, one task name with flags before or after it, and
// connects.
func (c *command) parseName(args []string) (string, error) {
	if err := c.fs.Parse(args); err != nil {
		return "", err
	}
	if c.fs.NArg() == 0 {
		return "", fmt.Errorf("%w: %s: no task name", errUsage, c.fs.Name())
	}
	name := c.fs.Arg(0)
	if err := c.fs.Parse(c.fs.Args()[1:]); err != nil {
		return "", err
	}
	if c.fs.NArg() != 0 {
		return "", fmt.Errorf("%w: %s takes one task name, not %q", errUsage, c.fs.Name(), c.fs.Args())
	}
	return name, c.connect()
}

func (c *command) connect() error {
	if c.kube.Kubeconfig == "" {
		c.kube.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	if c.kube.Kubeconfig == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if p := filepath.Join(home, ".kube", "config"); fileExists(p) {
				c.kube.Kubeconfig = p
			}
		}
	}
	cfg, err := c.kube.RestConfig()
	if err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("no cluster: pass --kubeconfig, set $KUBECONFIG, or run in a pod")
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.tasks = taskctl.Tasks{Client: dyn.Resource(api.Resource).Namespace(c.kube.Namespace), Resource: "etcdopstask", TargetField: api.TargetField}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func run(ctx context.Context, args []string, out io.Writer) (int, error) {
	if len(args) == 0 {
		return 0, errUsage
	}
	switch args[0] {
	case "create":
		if len(args) < 2 {
			return 0, errUsage
		}
		return create(ctx, args[1], args[2:], out)
	case "list":
		c := newCommand("list")
		if err := c.parse(args[1:]); err != nil {
			return 0, err
		}
		return ExitSucceeded, c.tasks.List(ctx, out)
	case "wait":
		c := newCommand("wait NAME")
		name, err := c.parseName(args[1:])
		if err != nil {
			return 0, err
		}
		return wait(ctx, c, name, out)
	case "approve":
		c := newCommand("approve NAME")
		dryRun := c.fs.Bool("dry-run", false, "show the plan and its token, approve nothing")
		name, err := c.parseName(args[1:])
		if err != nil {
			return 0, err
		}
		return ExitSucceeded, c.tasks.Approve(ctx, name, out, &taskctl.ApproveOptions{DryRun: *dryRun})
	case "-h", "--help", "help":
		return 0, flag.ErrHelp
	}
	return 0, fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func create(ctx context.Context, kind string, args []string, out io.Writer) (int, error) {
	c := newCommand("create " + kind)
	var (
		name, etcd string
		ttl        int
		noWait     bool
	)
	fs := c.fs
	fs.StringVar(&name, "name", "", "the task's name (default: generated from the kind)")
	fs.IntVar(&ttl, "ttl", -1, "spec.ttlSecondsAfterFinished (default: the controller's)")
	waitFlag := fs.Bool("wait", true, "wait for the task to finish, showing its progress")
	var cfg api.EtcdOpsTaskConfig
	var validate func() error
	needsEtcd := true
	switch kind {
	case "snapshot":
		typ := fs.String("type", "full", "full or delta")
		final := fs.Bool("final", false, "mark the full snapshot as the cluster's final one")
		validate = func() error {
			t := api.OnDemandSnapshotType(*typ)
			if t != api.SnapshotTypeFull && t != api.SnapshotTypeDelta {
				return fmt.Errorf("--type %q: want full or delta", *typ)
			}
			cfg.OnDemandSnapshot = &api.OnDemandSnapshotConfig{Type: t}
			if *final {
				cfg.OnDemandSnapshot.IsFinal = final
			}
			return nil
		}
	case "maintenance":
		compact := fs.Bool("compaction", false, "compact etcd's key space at its current revision")
		defrag := fs.Bool("defragmentation", false, "defragment each etcd member")
		validate = func() error {
			if !*compact && !*defrag {
				return errors.New("give --compaction, --defragmentation or both")
			}
			cfg.OnDemandMaintenance = &api.OnDemandMaintenanceConfig{MaintenanceType: api.MaintenanceOps{EtcdCompaction: *compact, EtcdDefragmentation: *defrag}}
			return nil
		}
	case "snapshot-compaction":
		validate = func() error { cfg.SnapshotCompaction = &api.SnapshotCompactionConfig{}; return nil }
	case "recover-quorum":
		allowLoss := fs.Bool("allow-data-loss", false, "recover even if a surviving member has revisions the backups lack (they are lost)")
		skip := fs.Bool("skip-approval", false, "act without waiting for the recovery point's approval (opstask approve)")
		validate = func() error {
			if *allowLoss && *skip {
				return errors.New("--allow-data-loss with --skip-approval: a recovery that may lose data waits for a person to approve its recovery point; drop --skip-approval and run `opstask approve NAME` once the plan is shown")
			}
			cfg.RecoverFromQuorumLoss = &api.RecoverFromQuorumLossConfig{AllowDataLoss: *allowLoss, SkipApproval: *skip}
			return nil
		}
	case "copy-backups":
		needsEtcd = false
		src := fs.String("source", "", "PROVIDER:CONTAINER[/PREFIX] of the backups, e.g. S3:backups/main/ (providers: S3, GCS, ABS, Local)")
		dst := fs.String("target", "", "PROVIDER:CONTAINER[/PREFIX] to copy them to")
		srcSecret := fs.String("source-secret", "", "Secret with the source store's credentials")
		dstSecret := fs.String("target-secret", "", "Secret with the target store's credentials")
		maxBackups := fs.Int("max-backups", 0, "copy only the newest N backups (0: all)")
		maxAge := fs.Int("max-backup-age", 0, "copy only backups younger than N days (0: all)")
		validate = func() error {
			cb := &api.CopyBackupsConfig{}
			var err error
			if cb.SourceStore, err = parseStore("--source", *src, *srcSecret); err != nil {
				return err
			}
			if cb.TargetStore, err = parseStore("--target", *dst, *dstSecret); err != nil {
				return err
			}
			if *maxBackups < 0 || *maxAge < 0 {
				return fmt.Errorf("--max-backups %d, --max-backup-age %d: must not be negative", *maxBackups, *maxAge)
			}
			if *maxBackups > 0 {
				n := uint32(*maxBackups)
				cb.MaxBackups = &n
			}
			if *maxAge > 0 {
				n := uint32(*maxAge)
				cb.MaxBackupAge = &n
			}
			cfg.CopyBackups = cb
			return nil
		}
	default:
		return 0, fmt.Errorf("%w: unknown task kind %q", errUsage, kind)
	}
	if needsEtcd {
		fs.StringVar(&etcd, "etcd", "", "the etcd the task operates on (spec.etcdName; required)")
	}
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	noWait = !*waitFlag
	if err := validate(); err != nil {
		return 0, err
	}
	if needsEtcd && etcd == "" {
		return 0, errors.New("--etcd is required")
	}
	task := &api.EtcdOpsTask{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.Group + "/" + api.Version, Kind: "EtcdOpsTask"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.EtcdOpsTaskSpec{Config: cfg},
	}
	if name == "" {
		task.GenerateName = kind + "-"
	}
	if needsEtcd {
		task.Spec.EtcdName = &etcd
	}
	if ttl >= 0 {
		t := int32(ttl)
		task.Spec.TTLSecondsAfterFinished = &t
	}
	if err := c.connect(); err != nil {
		return 0, err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		return 0, err
	}
	created, err := c.tasks.Client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("create EtcdOpsTask: %w", err)
	}
	fmt.Fprintf(out, "etcdopstask/%s created\n", created.GetName())
	if r := cfg.RecoverFromQuorumLoss; r != nil && !r.SkipApproval {
		fmt.Fprintf(out, "the recovery states its recovery point, then waits: review it and run: opstask approve %s\n", created.GetName())
	}
	if noWait {
		return ExitSucceeded, nil
	}
	return wait(ctx, c, created.GetName(), out)
}

// parseStore reads PROVIDER:CONTAINER[/PREFIX].
func parseStore(flagName, v, secret string) (api.StoreSpec, error) {
	provider, rest, ok := strings.Cut(v, ":")
	if !ok || provider == "" || rest == "" {
		return api.StoreSpec{}, fmt.Errorf("%s %q: want PROVIDER:CONTAINER[/PREFIX]", flagName, v)
	}
	s := api.StoreSpec{Provider: provider, SecretRef: secret}
	if provider == "Local" {
		// A directory: the container is the whole path.
		s.Container = rest
		return s, nil
	}
	s.Container, s.Prefix, _ = strings.Cut(rest, "/")
	return s, nil
}

// wait waits until the task finishes, printing every change.
func wait(ctx context.Context, c *command, name string, out io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	state, err := c.tasks.Wait(ctx, name, out)
	if errors.Is(err, taskctl.ErrNotFinished) {
		err = fmt.Errorf("%w within --timeout %s", err, c.timeout)
	}
	return taskctl.ExitCode(state, err), err
}
