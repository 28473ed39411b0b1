// Package opsctl is the command-line client of the etcd-opstask example
// (DEP-05's "CLI capabilities to operators"): it creates EtcdOpsTask
// resources, one sub-command per task kind, and mounts the commands of the
// kubectl plugin (cmd/kubectl-groundskeeper/plugin) set to the
// EtcdOpsTask resource: the queues, a task's progress until it finishes,
// and the approval of the plan a task waits at (a quorum-loss recovery's
// recovery point), a dry run unless --yes. cmd/opstask is its main
// package.
//
//	opstask create snapshot --etcd main --type full
//	opstask create maintenance --etcd main --compaction --defragmentation
//	opstask create snapshot-compaction --etcd main
//	opstask create recover-quorum --etcd main [--allow-data-loss] [--skip-approval]
//	opstask create copy-backups --source S3:backups/main/ --source-secret s3 --target GCS:dr/main/ --target-secret gcs
//	opstask tasks                       the queues, per etcd
//	opstask tasks wait NAME
//	opstask tasks approve NAME [--yes]  the plan a task waits at; approved with --yes
//
// The plugin's other commands (explain, backups, claims, lock, prefix) are
// there too. Every command takes kubectl's flags (--kubeconfig, --context,
// -n, …). create waits for the task to finish unless --wait=false. The
// exit code is 0 when the task Succeeded (approve: when the task is
// approved or the dry run printed), 1 when it Failed or was Rejected (or
// on any error), 2 on bad usage.
package opsctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask/taskctl"
)

// Exit codes: the plugin's, which are taskctl's.
const (
	ExitSucceeded = plugin.ExitOK
	ExitFailed    = plugin.ExitError
	ExitUsage     = plugin.ExitUsage
)

// Run runs the CLI with args (os.Args[1:]) and returns its exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugin.RunContext(ctx, NewCommand(&genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr}), args)
}

// NewCommand returns the root command: create, and the plugin's commands
// set to the EtcdOpsTask resource.
func NewCommand(streams *genericiooptions.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "opstask",
		Short: "Create, list, follow and approve the EtcdOpsTasks of the etcd-opstask operator",
		Example: `  opstask create snapshot --etcd main --type full -n prod
  opstask tasks -n prod
  opstask tasks approve recover-quorum-x7k2p -n prod --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	flags := genericclioptions.NewConfigFlags(true)
	root.AddCommand(newCreate(flags, streams.Out))
	plugin.AddTo(root, plugin.Options{
		Name:            "opstask",
		Tasks:           api.Resource.Resource + "." + api.Group,
		TaskTargetField: api.TargetField,
		Streams:         streams,
		ConfigFlags:     flags,
	})
	return root
}

// createFlags are the flags of every create command.
type createFlags struct {
	name    string
	etcd    string
	ttl     int
	wait    bool
	timeout time.Duration
}

// kind is one task kind of create: its flags, and how they make the
// task's config.
type kind struct {
	use, short string
	needsEtcd  bool
	// flags registers the kind's flags and returns what makes the config
	// of them, or an error naming the flag and its value.
	flags func(cmd *cobra.Command, cfg *api.EtcdOpsTaskConfig) (validate func() error)
}

var kinds = []kind{
	{use: "snapshot", short: "Take an on-demand snapshot of an etcd (full or delta)", needsEtcd: true,
		flags: func(cmd *cobra.Command, cfg *api.EtcdOpsTaskConfig) func() error {
			typ := cmd.Flags().String("type", "full", "full or delta")
			final := cmd.Flags().Bool("final", false, "mark the full snapshot as the cluster's final one")
			return func() error {
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
		}},
	{use: "maintenance", short: "Compact and/or defragment an etcd", needsEtcd: true,
		flags: func(cmd *cobra.Command, cfg *api.EtcdOpsTaskConfig) func() error {
			compact := cmd.Flags().Bool("compaction", false, "compact etcd's key space at its current revision")
			defrag := cmd.Flags().Bool("defragmentation", false, "defragment each etcd member")
			return func() error {
				if !*compact && !*defrag {
					return errors.New("give --compaction, --defragmentation or both")
				}
				cfg.OnDemandMaintenance = &api.OnDemandMaintenanceConfig{MaintenanceType: api.MaintenanceOps{EtcdCompaction: *compact, EtcdDefragmentation: *defrag}}
				return nil
			}
		}},
	{use: "snapshot-compaction", short: "Compact an etcd's delta snapshots into a full one", needsEtcd: true,
		flags: func(_ *cobra.Command, cfg *api.EtcdOpsTaskConfig) func() error {
			return func() error { cfg.SnapshotCompaction = &api.SnapshotCompactionConfig{}; return nil }
		}},
	{use: "recover-quorum", short: "Recover an etcd that lost its quorum for good, from its backups", needsEtcd: true,
		flags: func(cmd *cobra.Command, cfg *api.EtcdOpsTaskConfig) func() error {
			allowLoss := cmd.Flags().Bool("allow-data-loss", false, "recover even if a surviving member has revisions the backups lack (they are lost)")
			skip := cmd.Flags().Bool("skip-approval", false, "act without waiting for the recovery point's approval (opstask tasks approve)")
			return func() error {
				if *allowLoss && *skip {
					return errors.New("--allow-data-loss with --skip-approval: a recovery that may lose data waits for a person to approve its recovery point; drop --skip-approval and run `opstask tasks approve NAME --yes` once the plan is shown")
				}
				cfg.RecoverFromQuorumLoss = &api.RecoverFromQuorumLossConfig{AllowDataLoss: *allowLoss, SkipApproval: *skip}
				return nil
			}
		}},
	{use: "copy-backups", short: "Copy an etcd's backups to another store",
		flags: func(cmd *cobra.Command, cfg *api.EtcdOpsTaskConfig) func() error {
			fs := cmd.Flags()
			src := fs.String("source", "", "PROVIDER:CONTAINER[/PREFIX] of the backups, e.g. S3:backups/main/ (providers: S3, GCS, ABS, Local)")
			dst := fs.String("target", "", "PROVIDER:CONTAINER[/PREFIX] to copy them to")
			srcSecret := fs.String("source-secret", "", "Secret with the source store's credentials")
			dstSecret := fs.String("target-secret", "", "Secret with the target store's credentials")
			maxBackups := fs.Int("max-backups", 0, "copy only the newest N backups (0: all)")
			maxAge := fs.Int("max-backup-age", 0, "copy only backups younger than N days (0: all)")
			return func() error {
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
		}},
}

func newCreate(flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create KIND",
		Short: "Create an EtcdOpsTask and wait for it to finish",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	for _, k := range kinds {
		cmd.AddCommand(newCreateKind(k, flags, out))
	}
	return cmd
}

func newCreateKind(k kind, flags *genericclioptions.ConfigFlags, out io.Writer) *cobra.Command {
	var f createFlags
	var cfg api.EtcdOpsTaskConfig
	cmd := &cobra.Command{Use: k.use, Short: k.short, Args: cobra.NoArgs}
	validate := k.flags(cmd, &cfg)
	fs := cmd.Flags()
	fs.StringVar(&f.name, "name", "", "the task's name (default: generated from the kind)")
	fs.IntVar(&f.ttl, "ttl", -1, "spec.ttlSecondsAfterFinished (default: the controller's)")
	fs.BoolVar(&f.wait, "wait", true, "wait for the task to finish, showing its progress")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Minute, "how long to wait for the task to finish")
	if k.needsEtcd {
		fs.StringVar(&f.etcd, "etcd", "", "the etcd the task operates on (spec.etcdName; required)")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := validate(); err != nil {
			return err
		}
		if k.needsEtcd && f.etcd == "" {
			return errors.New("--etcd is required")
		}
		return create(cmd.Context(), k.use, cfg, f, flags, out)
	}
	return cmd
}

// create creates the task and, unless --wait=false, waits for it.
func create(ctx context.Context, kind string, cfg api.EtcdOpsTaskConfig, f createFlags, flags *genericclioptions.ConfigFlags, out io.Writer) error {
	task := &api.EtcdOpsTask{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.Group + "/" + api.Version, Kind: "EtcdOpsTask"},
		ObjectMeta: metav1.ObjectMeta{Name: f.name},
		Spec:       api.EtcdOpsTaskSpec{Config: cfg},
	}
	if f.name == "" {
		task.GenerateName = kind + "-"
	}
	if f.etcd != "" {
		task.Spec.EtcdName = &f.etcd
	}
	if f.ttl >= 0 {
		t := int32(f.ttl)
		task.Spec.TTLSecondsAfterFinished = &t
	}
	tasks, err := connect(flags)
	if err != nil {
		return err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		return err
	}
	created, err := tasks.Client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create EtcdOpsTask: %w", err)
	}
	fmt.Fprintf(out, "etcdopstask/%s created\n", created.GetName())
	if r := cfg.RecoverFromQuorumLoss; r != nil && !r.SkipApproval {
		fmt.Fprintf(out, "the recovery states its recovery point, then waits: review it with `opstask tasks approve %s`, then approve it with --yes\n", created.GetName())
	}
	if !f.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	state, err := tasks.Wait(ctx, created.GetName(), out)
	if errors.Is(err, taskctl.ErrNotFinished) {
		return fmt.Errorf("%w within --timeout %s", err, f.timeout)
	}
	if err != nil {
		return err
	}
	if taskctl.ExitCode(state, nil) != taskctl.ExitSucceeded {
		return fmt.Errorf("etcdopstask/%s %s", created.GetName(), state)
	}
	return nil
}

// connect makes the task client of the namespace the flags name.
func connect(flags *genericclioptions.ConfigFlags) (taskctl.Tasks, error) {
	cfg, err := plugin.RESTConfig(flags)
	if err != nil {
		return taskctl.Tasks{}, err
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return taskctl.Tasks{}, fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return taskctl.Tasks{}, err
	}
	return taskctl.Tasks{Client: dyn.Resource(api.Resource).Namespace(ns), Resource: "etcdopstask", TargetField: api.TargetField}, nil
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
