package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Exit codes of every command.
const (
	ExitOK    = 0 // done; for a dry run, the plan was printed
	ExitError = 1 // the command failed; one line on stderr says why
	ExitUsage = 2 // bad usage: an unknown command or flag, a missing argument
)

// Options are an operator's resource types, names and defaults. The zero
// value is the generic plugin: every resource is named on the command line.
type Options struct {
	// Name is the command's name as a person types it ("kubectl
	// groundskeeper", "kubectl myoperator"); "kubectl groundskeeper" when
	// empty. It is used in the help and its examples.
	Name string

	// Tasks is the default task resource of the tasks command
	// ("etcdopstasks.ops.example.com", as kubectl names a resource), and
	// TaskTargetField the spec field naming a task's target (as
	// kubestore.Config.TargetField). --resource and --target-field
	// override them.
	Tasks, TaskTargetField string

	// LockName is the default ConfigMap of the lock command (kubelock's
	// Config.Name, in the namespace of -n), and LockPrefix the key prefix
	// (locking.Config.Prefix; locking.DefaultPrefix when empty).
	LockName, LockPrefix string

	// Backups is the default backup resource of the backups command,
	// BackupGroupLabel the label whose value is a backup's group, and
	// BackupPolicy the default retention policy (retention.ParsePolicy).
	Backups, BackupGroupLabel, BackupPolicy string

	// Annotations names the unmount tracking annotations of claims
	// (lifecycle.Annotations; its zero value is groundskeeper's).
	Annotations lifecycle.Annotations

	// Streams are the command's input and outputs; os.Stdin, os.Stdout and
	// os.Stderr when nil.
	Streams *genericiooptions.IOStreams

	// Clock says what time it is, for ages and time left; the real clock
	// when nil.
	Clock clock.PassiveClock

	// ConfigFlags are the kubectl flags (--kubeconfig, --context, -n, …)
	// that AddTo registers on the root command; new ones when nil. An
	// operator whose plugin has commands of its own passes its own, so that
	// they connect as the mounted commands do (ToRESTConfig,
	// ToRawKubeConfigLoader).
	ConfigFlags *genericclioptions.ConfigFlags
}

// Main runs the command with args (os.Args[1:]) and returns its exit code:
// ExitOK, ExitError with one line on stderr naming what failed, or
// ExitUsage.
func Main(o Options, args []string) int {
	return Run(NewCommand(o), args)
}

// Run executes cmd (the root of an operator's own plugin, with AddTo's
// commands) with args, and returns its exit code as Main does.
func Run(cmd *cobra.Command, args []string) int {
	return RunContext(context.Background(), cmd, args)
}

// RunContext is Run with a context, which the commands stop on (a signal's,
// say: signal.NotifyContext).
func RunContext(ctx context.Context, cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "error: "+oneLine(err.Error()))
	var u usageError
	if errors.As(err, &u) {
		return ExitUsage
	}
	return ExitError
}

// usageError marks an error of the command line itself.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// oneLine keeps an error on one line, as a person reads it in a terminal.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// env is what every command is given: the kubectl flags, the streams, the
// clock and the operator's Options.
type env struct {
	opts    Options
	name    string
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	clock   clock.PassiveClock
}

func (e *env) namespace() (string, error) {
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// RESTConfig is the REST config that flags name, as the commands that
// AddTo mounts connect: an operator's own commands call it with
// Options.ConfigFlags. Without a kubeconfig (--kubeconfig, $KUBECONFIG,
// ~/.kube/config), a --server or a pod's service account, it returns an
// error that says so, where kubectl's loader would connect to
// localhost:8080 and fail with lines of discovery errors.
func RESTConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	loader := flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if len(raw.Clusters) == 0 && (flags.APIServer == nil || *flags.APIServer == "") {
		if _, err := rest.InClusterConfig(); err != nil {
			return nil, errors.New("no kubeconfig: pass --kubeconfig, set $KUBECONFIG or write ~/.kube/config (in a pod, its service account is used)")
		}
	}
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

func (e *env) clients() (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := RESTConfig(e.flags)
	if err != nil {
		return nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return kc, dc, nil
}

// NewCommand returns the root command of kubectl-groundskeeper, with every
// subcommand and kubectl's flags (AddTo).
func NewCommand(o Options) *cobra.Command {
	name := o.Name
	if name == "" {
		name = "kubectl groundskeeper"
	}
	use := name
	if i := strings.LastIndex(use, " "); i >= 0 {
		use = use[i+1:]
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: "Explain what groundskeeper's controllers keep, lock and queue",
		Long: `Explain the decisions of operators built on groundskeeper, before anything is deleted:
why a backup or a claim is kept, who holds the operator lock, what is queued.
Every command that writes is a dry run unless --yes is given.`,
		Example: fmt.Sprintf(`  # Why is this backup kept?
  %[1]s explain etcdbackups.backup.example.com/nightly-0412 -n prod

  # Who holds the operator lock, and which instances are denied it?
  %[1]s lock --configmap my-operator-lock -n operators

  # What is queued for each target?
  %[1]s tasks --resource etcdopstasks.ops.example.com --target-field etcdName`, name),
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: name},
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	o.Name = name
	AddTo(cmd, o)
	return cmd
}

// AddTo mounts the commands (explain, backups, claims, lock, tasks, prefix) on root, an operator's
// own plugin command, with kubectl's flags (--kubeconfig, --context, -n,
// …) as root's persistent flags and o's resource types, names and
// defaults. Run root with Run for the exit codes and one-line errors.
func AddTo(root *cobra.Command, o Options) {
	e := &env{opts: o, name: o.Name, clock: o.Clock}
	if e.name == "" {
		e.name = root.Name()
	}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	if o.Streams != nil {
		e.streams = *o.Streams
	} else {
		e.streams = genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	}
	e.flags = o.ConfigFlags
	if e.flags == nil {
		e.flags = genericclioptions.NewConfigFlags(true)
	}
	root.SetIn(e.streams.In)
	root.SetOut(e.streams.Out)
	root.SetErr(e.streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newExplain(e), newBackups(e), newClaims(e), newLock(e), newTasks(e), newPrefix(e))
	wrapArgs(root)
}

// wrapArgs marks an argument count error as bad usage, on c and below.
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
			}
			return nil
		}
	}
	for _, s := range c.Commands() {
		wrapArgs(s)
	}
}

// confirm asks a person on a terminal to confirm what is printed: it
// returns true only for "y" or "yes". Without a terminal it returns false,
// and the command stays a dry run.
func (e *env) confirm(question string) (bool, error) {
	if !isTerminal(e.streams.In) {
		return false, nil
	}
	fmt.Fprintf(e.streams.Out, "%s [y/N] ", question)
	line, err := bufio.NewReader(e.streams.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read the answer: %w", err)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}

// isTerminal reports whether s (a stream) is a terminal.
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
