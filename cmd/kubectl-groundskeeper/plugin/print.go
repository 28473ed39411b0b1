package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// APIVersion is the apiVersion of what -o json and -o yaml print: views
// built by this command, not resources of the cluster.
const APIVersion = "kubectl.groundskeeper.io/v1alpha1"

// output adds -o to cmd: table (the default), wide, json, yaml and name,
// as kubectl's printers print them.
type output struct {
	flags *genericclioptions.PrintFlags
}

func addOutput(cmd *cobra.Command) *output {
	o := &output{flags: genericclioptions.NewPrintFlags("")}
	o.flags.OutputFormat = new(string)
	cmd.Flags().StringVarP(o.flags.OutputFormat, "output", "o", "",
		"Output format: table (default), wide, json, yaml, name")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp
	})
	return o
}

func (o *output) format() string { return *o.flags.OutputFormat }

// validate rejects an unknown format before anything is read.
func (o *output) validate() error {
	switch o.format() {
	case "", "table", "wide", "json", "yaml", "name":
		return nil
	}
	return usageError{fmt.Errorf("-o %s: unknown output format, want table, wide, json, yaml or name", o.format())}
}

// structured reports whether the view is printed as an object.
func (o *output) structured() bool {
	switch o.format() {
	case "json", "yaml", "name":
		return true
	}
	return false
}

// print writes view (a struct with json tags) as -o json, yaml or name, as
// an object of kind with APIVersion; or else table, by kubectl's table
// printer (wide adds the columns of priority 1).
func (o *output) print(w io.Writer, kind, namespace, name string, view any, table *metav1.Table) error {
	if !o.structured() {
		return printers.NewTablePrinter(printers.PrintOptions{Wide: o.format() == "wide"}).PrintObj(table, w)
	}
	u, err := toObject(kind, namespace, name, view)
	if err != nil {
		return err
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(u, w)
}

// namespaced is one view of a listing across namespaces (-A).
type namespaced struct {
	namespace, name string
	view            any
}

// printViews writes views structured (-o json, yaml or name): the first
// alone, or with all (-A) every one in a List, each named by id.
func printViews[V any](o *output, w io.Writer, kind string, views []V, all bool, id func(V) (namespace, name string)) error {
	if !all {
		ns, name := id(views[0])
		return o.print(w, kind, ns, name, views[0], nil)
	}
	list := make([]namespaced, len(views))
	for i, v := range views {
		ns, name := id(v)
		list[i] = namespaced{ns, name, v}
	}
	return o.printList(w, kind, list)
}

// printList writes views as a List of objects of kind (-o json, yaml or
// name), as kubectl prints what it lists across namespaces.
func (o *output) printList(w io.Writer, kind string, views []namespaced) error {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, v := range views {
		u, err := toObject(kind, v.namespace, v.name, v.view)
		if err != nil {
			return err
		}
		l.Items = append(l.Items, *u)
	}
	p, err := o.flags.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(l, w)
}

// toObject turns view into an unstructured object of kind named
// namespace/name.
func toObject(kind, namespace, name string, view any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(view)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(APIVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u, nil
}

// columns builds a table's column definitions; a name ending in "+" is
// printed only with -o wide.
func columns(names ...string) []metav1.TableColumnDefinition {
	return columnsIn(false, names...)
}

// columnsIn is columns with a NAMESPACE column first when allNamespaces, as
// kubectl prints a listing with -A; rowIn fills it.
func columnsIn(allNamespaces bool, names ...string) []metav1.TableColumnDefinition {
	if allNamespaces {
		names = append([]string{"NAMESPACE"}, names...)
	}
	cols := make([]metav1.TableColumnDefinition, len(names))
	for i, n := range names {
		cols[i] = metav1.TableColumnDefinition{Name: n, Type: "string"}
		if len(n) > 1 && n[len(n)-1] == '+' {
			cols[i].Name, cols[i].Priority = n[:len(n)-1], 1
		}
	}
	return cols
}

func row(cells ...any) metav1.TableRow { return metav1.TableRow{Cells: cells} }

// rowIn is row with the namespace first when allNamespaces.
func rowIn(allNamespaces bool, namespace string, cells ...any) metav1.TableRow {
	if allNamespaces {
		cells = append([]any{namespace}, cells...)
	}
	return row(cells...)
}

// addAllNamespaces adds kubectl's -A to cmd.
func addAllNamespaces(cmd *cobra.Command, all *bool) {
	cmd.Flags().BoolVarP(all, "all-namespaces", "A", false,
		"list across all namespaces, with a NAMESPACE column first; the namespace of -n or the kubeconfig is ignored")
}

// human prints d as kubectl prints ages ("5m10s", "3d"); negative as "-"
// and the value.
func human(d time.Duration) string {
	if d < 0 {
		return "-" + duration.HumanDuration(-d)
	}
	return duration.HumanDuration(d)
}

// stamp prints t in UTC, RFC 3339, or "-" when zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
