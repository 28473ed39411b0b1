package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"
	"gocloud.dev/blob"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	// The stores a person may name: the plugin links every provider.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
)

// PrefixView is what prefix prints with -o json or yaml.
type PrefixView struct {
	// URL is the prefix's address as given; BucketURL and Prefix its two
	// parts.
	URL       string `json:"url"`
	BucketURL string `json:"bucketURL"`
	Prefix    string `json:"prefix"`
	// Objects and Bytes count the current objects under the prefix;
	// Oldest and Newest are their modification times.
	Objects int64     `json:"objects"`
	Bytes   int64     `json:"bytes"`
	Oldest  time.Time `json:"oldest,omitzero"`
	Newest  time.Time `json:"newest,omitzero"`
	// Versioned reports that the store keeps versions (S3 versioning, GCS
	// object versioning); Versions, DeleteMarkers and VersionBytes then
	// count every version under the prefix, noncurrent ones included:
	// what a deletion removes and what the store bills.
	Versioned     bool  `json:"versioned"`
	Versions      int64 `json:"versions,omitempty"`
	DeleteMarkers int64 `json:"deleteMarkers,omitempty"`
	VersionBytes  int64 `json:"versionBytes,omitempty"`
	// Retained are the versions S3 Object Lock keeps from deletion now.
	Retained []RetainedVersion `json:"retained"`
	// Lifecycle are the store's lifecycle rules that expire all or part
	// of the prefix (S3, GCS); LifecycleNote says why none could be read.
	Lifecycle     []LifecycleRule `json:"lifecycle"`
	LifecycleNote string          `json:"lifecycleNote,omitempty"`
	// NotShown says what this view cannot show for this store.
	NotShown []string `json:"notShown,omitempty"`
}

// RetainedVersion is a version under S3 Object Lock.
type RetainedVersion struct {
	Key         string    `json:"key"`
	VersionID   string    `json:"versionID"`
	Mode        string    `json:"mode,omitempty"`
	RetainUntil time.Time `json:"retainUntil,omitzero"`
	LegalHold   bool      `json:"legalHold,omitempty"`
}

// LifecycleRule is an S3 or GCS lifecycle rule whose filter covers the
// prefix (All) or part of it.
type LifecycleRule struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Prefix is the rule's filter prefix, as the store spells it (with
	// the bucket's own prefix=).
	Prefix string `json:"prefix"`
	All    bool   `json:"all"`
	// Date and Days are when current versions expire; NoncurrentDays
	// when noncurrent versions do.
	Date                 time.Time `json:"date,omitzero"`
	Days                 int32     `json:"days,omitempty"`
	NoncurrentDays       int32     `json:"noncurrentDays,omitempty"`
	ExpiredDeleteMarkers bool      `json:"expiredDeleteMarkers,omitempty"`
	// Groundskeeper reports a rule of backupstore.ExpirePrefix.
	Groundskeeper bool `json:"groundskeeper,omitempty"`
}

// prefixFlags name the credentials of a prefix's store.
type prefixFlags struct {
	secret string
}

func (f *prefixFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.secret, "secret", "", "read the store's credentials from this Secret, [NAMESPACE/]NAME (the namespace of -n by default), as the controllers read it (backupstore.LoadCredentials); unset: the environment's (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*)")
}

// splitPrefixURL splits the address of a prefix, the bucket URL with the
// prefix after the bucket and before the query ("s3://b/db-1/?region=x",
// as backupstore/collect's Location.Where prints it), into the bucket's
// URL and the prefix.
func splitPrefixURL(raw string) (bucketURL, prefix string, err error) {
	bad := func(why string) error {
		return usageError{fmt.Errorf("URL %q: %s; want SCHEME://BUCKET/PREFIX/[?PARAMETERS], such as s3://backups/db-1/?region=eu-west-1", raw, why)}
	}
	base, query, hasQuery := strings.Cut(raw, "?")
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", "", bad("no scheme")
	}
	if scheme == "file" {
		return "", "", bad("a file:// URL's path is the bucket, so it cannot name a prefix")
	}
	host, prefix, _ := strings.Cut(rest, "/")
	if host == "" {
		return "", "", bad("no bucket")
	}
	bucketURL = scheme + "://" + host
	if hasQuery {
		bucketURL += "?" + query
	}
	if _, err := backupstore.ParseURL(bucketURL); err != nil {
		return "", "", usageError{fmt.Errorf("URL %q: %w", raw, err)}
	}
	return bucketURL, prefix, nil
}

// open opens the bucket of the prefix at raw, with the credentials of
// --secret or the environment's.
func (f *prefixFlags) open(ctx context.Context, e *env, raw string) (b *blob.Bucket, bucketURL, prefix string, err error) {
	if bucketURL, prefix, err = splitPrefixURL(raw); err != nil {
		return nil, "", "", err
	}
	var creds *backupstore.Credentials
	if f.secret != "" {
		ns, name, ok := strings.Cut(f.secret, "/")
		if !ok {
			name = ns
			if ns, err = e.namespace(); err != nil {
				return nil, "", "", err
			}
		}
		if ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, "", "", usageError{fmt.Errorf("--secret %q: want [NAMESPACE/]NAME", f.secret)}
		}
		kc, _, err := e.clients()
		if err != nil {
			return nil, "", "", err
		}
		scheme, err := backupstore.Scheme(bucketURL)
		if err != nil {
			return nil, "", "", usageError{fmt.Errorf("URL %q: %w", raw, err)}
		}
		if creds, err = backupstore.LoadCredentials(ctx, backupstore.SecretsFrom(kc.CoreV1()), ns, name, scheme); err != nil {
			return nil, "", "", fmt.Errorf("--secret %s: %w", f.secret, err)
		}
	}
	b, err = backupstore.OpenBucket(ctx, bucketURL, creds)
	if err != nil {
		return nil, "", "", fmt.Errorf("open %s: %w", bucketURL, err)
	}
	return b, bucketURL, prefix, nil
}

func newPrefix(e *env) *cobra.Command {
	var f prefixFlags
	var out *output
	cmd := &cobra.Command{
		Use:   "prefix URL",
		Short: "Show what an object-store prefix holds: objects, bytes, versions, Object Lock, lifecycle rules",
		Long: `Show what is stored under a prefix of a bucket, named as the bucket URL with
the prefix after the bucket (s3://backups/db-1/?region=eu-west-1, as the
collector's messages name a backup's data): the current objects, their bytes
and the oldest and newest; on a versioned bucket every version and delete
marker with their bytes (what a deletion removes and what the store bills);
the versions S3 Object Lock keeps, with their retain-until time or legal
hold; and the S3 or GCS lifecycle rules that expire all or part of the prefix. It
reads, through backupstore's dry run of DeletePrefix; it deletes nothing.
What a store cannot show is listed under "not shown". A prefix that does not
end in "/" also counts its siblings ("db" holds "db2/").`,
		Example: fmt.Sprintf(`  %[1]s prefix s3://backups/db-1/?region=eu-west-1
  %[1]s prefix s3://backups/db-1/ --secret prod/s3-creds -o json
  %[1]s prefix rm s3://backups/db-1/ --secret prod/s3-creds`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			b, bucketURL, prefix, err := f.open(ctx, e, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			v, err := readPrefix(ctx, b, bucketURL, prefix)
			if err != nil {
				return err
			}
			v.URL = args[0]
			return printPrefix(e, out, v)
		},
	}
	f.add(cmd)
	out = addOutput(cmd)
	cmd.AddCommand(newPrefixRm(e))
	return cmd
}

// readPrefix reads what the prefix holds: a listing for the current
// objects and their times, DeletePrefix's dry run for the versions and
// Object Lock, and the S3 lifecycle configuration.
func readPrefix(ctx context.Context, b *blob.Bucket, bucketURL, prefix string) (PrefixView, error) {
	v := PrefixView{BucketURL: bucketURL, Prefix: prefix, Retained: []RetainedVersion{}, Lifecycle: []LifecycleRule{}}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return v, fmt.Errorf("list %s under %q: %w", bucketURL, prefix, err)
		}
		v.Objects++
		v.Bytes += o.Size
		if t := o.ModTime.UTC(); !t.IsZero() {
			if v.Oldest.IsZero() || t.Before(v.Oldest) {
				v.Oldest = t
			}
			if t.After(v.Newest) {
				v.Newest = t
			}
		}
	}
	// A view, not a deletion: any prefix may be looked at.
	dry, err := backupstore.DeletePrefix(ctx, b, prefix, &backupstore.DeleteOptions{DryRun: true,
		PrefixRules: backupstore.PrefixRules{AllowEmpty: true, AllowPartial: true}})
	if err != nil {
		return v, fmt.Errorf("%s under %q: %w", bucketURL, prefix, err)
	}
	v.Versioned = dry.Versioned
	for _, ov := range dry.Versions {
		if ov.DeleteMarker {
			v.DeleteMarkers++
		} else {
			v.Versions++
			v.VersionBytes += ov.Size
		}
		if r := ov.Retention; r != nil {
			v.Retained = append(v.Retained, RetainedVersion{Key: ov.Key, VersionID: ov.VersionID, Mode: r.Mode, RetainUntil: r.RetainUntil.UTC(), LegalHold: r.LegalHold})
		}
	}
	u, err := backupstore.ParseURL(bucketURL)
	if err != nil {
		return v, err
	}
	switch u.ID.Scheme {
	case "s3":
		if err := s3Lifecycle(ctx, b, u, prefix, &v); err != nil {
			return v, err
		}
		v.NotShown = []string{"lifecycle rules filtered on tags or object size are listed by their prefix alone"}
	case "gs":
		if err := gcsLifecycle(ctx, b, u, prefix, &v); err != nil {
			return v, err
		}
		v.NotShown = []string{"GCS retention policies and holds (deletion may still be refused by them)",
			"lifecycle conditions other than age, prefix and liveness (a rule with one is listed as covering part of the prefix)"}
	case "azblob":
		// A storage account's lifecycle management policy is read through
		// Azure Resource Manager, with other credentials than the blob
		// service's, which are all a prefix's Secret holds.
		v.LifecycleNote = "not read on Azure: the storage account's lifecycle management policy is read through Azure Resource Manager, not the blob service"
		v.NotShown = []string{"Azure immutability policies and legal holds", "noncurrent blob versions", "lifecycle management rules"}
	default:
		v.LifecycleNote = "the store has none"
	}
	return v, nil
}

// s3Lifecycle adds to v the S3 lifecycle rules whose filter prefix covers
// all or part of the prefix, through the bucket's S3 client.
func s3Lifecycle(ctx context.Context, b *blob.Bucket, u backupstore.URL, prefix string, v *PrefixView) error {
	var c *s3.Client
	if !b.As(&c) {
		v.LifecycleNote = "no S3 client to read them with"
		return nil
	}
	lc, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &u.ID.Name})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchLifecycleConfiguration" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the lifecycle rules of %s: %w", u.ID, err)
	}
	full := u.Prefix + prefix
	for _, r := range lc.Rules {
		rp := ""
		switch {
		case r.Filter != nil && r.Filter.Prefix != nil:
			rp = *r.Filter.Prefix
		case r.Filter != nil && r.Filter.And != nil && r.Filter.And.Prefix != nil:
			rp = *r.Filter.And.Prefix
		default:
			rp = legacyPrefix(r)
		}
		all, part := strings.HasPrefix(full, rp), strings.HasPrefix(rp, full)
		if !all && !part {
			continue
		}
		lr := LifecycleRule{Status: string(r.Status), Prefix: rp, All: all}
		if r.ID != nil {
			lr.ID = *r.ID
			lr.Groundskeeper = strings.HasPrefix(lr.ID, "groundskeeper/")
		}
		if x := r.Expiration; x != nil {
			if x.Date != nil {
				lr.Date = x.Date.UTC()
			}
			if x.Days != nil {
				lr.Days = *x.Days
			}
			lr.ExpiredDeleteMarkers = x.ExpiredObjectDeleteMarker != nil && *x.ExpiredObjectDeleteMarker
		}
		if n := r.NoncurrentVersionExpiration; n != nil && n.NoncurrentDays != nil {
			lr.NoncurrentDays = *n.NoncurrentDays
		}
		v.Lifecycle = append(v.Lifecycle, lr)
	}
	return nil
}

// gcsLifecycle adds to v the GCS lifecycle rules that delete objects and
// whose condition covers all or part of the prefix, through the bucket's
// GCS client. A rule with several prefixes is listed once, by the first
// that covers the prefix. GCS rules have no ID and are always enabled.
func gcsLifecycle(ctx context.Context, b *blob.Bucket, u backupstore.URL, prefix string, v *PrefixView) error {
	var c *storage.Client
	if !b.As(&c) {
		v.LifecycleNote = "no GCS client to read them with"
		return nil
	}
	attrs, err := c.Bucket(u.ID.Name).Attrs(ctx)
	if err != nil {
		return fmt.Errorf("read the lifecycle rules of %s: %w", u.ID, err)
	}
	full := u.Prefix + prefix
	for _, r := range attrs.Lifecycle.Rules {
		if r.Action.Type != storage.DeleteAction {
			continue // a storage class change expires nothing
		}
		cond := r.Condition
		prefixes := cond.MatchesPrefix
		if len(prefixes) == 0 {
			prefixes = []string{""}
		}
		// Conditions that pick some objects only, whatever their key.
		narrowed := len(cond.MatchesSuffix) > 0 || !cond.CreatedBefore.IsZero() || cond.NumNewerVersions > 0 ||
			len(cond.MatchesStorageClasses) > 0 || !cond.CustomTimeBefore.IsZero() || cond.DaysSinceCustomTime > 0 ||
			!cond.NoncurrentTimeBefore.IsZero()
		for _, rp := range prefixes {
			all, part := strings.HasPrefix(full, rp), strings.HasPrefix(rp, full)
			if !all && !part {
				continue
			}
			lr := LifecycleRule{Status: "Enabled", Prefix: rp, All: all && !narrowed}
			switch {
			case cond.Liveness == storage.Archived:
				lr.NoncurrentDays = int32(cond.AgeInDays)
			case cond.DaysSinceNoncurrentTime > 0:
				lr.NoncurrentDays = int32(cond.DaysSinceNoncurrentTime)
			default:
				lr.Days = int32(cond.AgeInDays)
			}
			v.Lifecycle = append(v.Lifecycle, lr)
			break
		}
	}
	return nil
}

// legacyPrefix is the rule's prefix in the deprecated form, which stores
// still serve and honour; "" without one.
func legacyPrefix(r s3types.LifecycleRule) string {
	//lint:ignore SA1019 the deprecated form is still served and honoured
	return aws.ToString(r.Prefix)
}

// size prints n bytes as kubectl prints quantities ("1Ki", "12Mi") and
// exactly.
func size(n int64) string {
	q := resource.NewQuantity(n, resource.BinarySI)
	if s := q.String(); s != fmt.Sprint(n) {
		return fmt.Sprintf("%s (%d bytes)", s, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

func printPrefix(e *env, out *output, v PrefixView) error {
	w := e.streams.Out
	if out.structured() {
		return out.print(w, "PrefixUsage", "", v.URL, v, nil)
	}
	t := &metav1.Table{ColumnDefinitions: columns("OBJECTS", "BYTES", "OLDEST", "NEWEST", "VERSIONS", "DELETE MARKERS", "VERSION BYTES", "RETAINED")}
	versions, markers, vbytes := "-", "-", "-"
	if v.Versioned {
		versions, markers, vbytes = fmt.Sprint(v.Versions), fmt.Sprint(v.DeleteMarkers), fmt.Sprint(v.VersionBytes)
	}
	t.Rows = append(t.Rows, row(fmt.Sprint(v.Objects), fmt.Sprint(v.Bytes), stamp(v.Oldest), stamp(v.Newest), versions, markers, vbytes, fmt.Sprint(len(v.Retained))))
	fmt.Fprintf(w, "%s: prefix %q of %s\n\n", v.URL, v.Prefix, v.BucketURL)
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	if len(v.Retained) > 0 {
		fmt.Fprintln(w)
		r := &metav1.Table{ColumnDefinitions: columns("RETAINED KEY", "VERSION", "MODE", "RETAIN UNTIL", "LEGAL HOLD")}
		for _, x := range v.Retained {
			mode, hold := x.Mode, "no"
			if mode == "" {
				mode = "-"
			}
			if x.LegalHold {
				hold = "yes"
			}
			r.Rows = append(r.Rows, row(x.Key, x.VersionID, mode, stamp(x.RetainUntil), hold))
		}
		if err := out.print(w, "", "", "", nil, r); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	switch {
	case len(v.Lifecycle) > 0:
		l := &metav1.Table{ColumnDefinitions: columns("LIFECYCLE RULE", "STATUS", "PREFIX", "COVERS", "EXPIRES", "NONCURRENT AFTER")}
		for _, r := range v.Lifecycle {
			covers, expires, noncurrent := "part", "-", "-"
			if r.All {
				covers = "all"
			}
			switch {
			case !r.Date.IsZero():
				expires = stamp(r.Date)
			case r.Days > 0:
				expires = fmt.Sprintf("%dd after creation", r.Days)
			case r.ExpiredDeleteMarkers:
				expires = "expired delete markers"
			}
			if r.NoncurrentDays > 0 {
				noncurrent = fmt.Sprintf("%dd", r.NoncurrentDays)
			}
			id, rp := r.ID, r.Prefix
			if id == "" {
				id = "-" // GCS rules have none
			}
			if rp == "" {
				rp = "(whole bucket)"
			}
			l.Rows = append(l.Rows, row(id, r.Status, rp, covers, expires, noncurrent))
		}
		if err := out.print(w, "", "", "", nil, l); err != nil {
			return err
		}
	case v.LifecycleNote != "":
		fmt.Fprintf(w, "lifecycle rules: %s\n", v.LifecycleNote)
	default:
		fmt.Fprintln(w, "lifecycle rules: none covers the prefix")
	}
	if len(v.NotShown) > 0 {
		fmt.Fprintf(w, "not shown: %s\n", strings.Join(v.NotShown, "; "))
	}
	return nil
}

func newPrefixRm(e *env) *cobra.Command {
	var f prefixFlags
	var yes bool
	cmd := &cobra.Command{
		Use:   "rm URL",
		Short: "Delete everything under a prefix (dry run unless --yes or confirmed)",
		Long: `Delete every object under a prefix, every version and delete marker of a
versioned bucket included, with backupstore.DeletePrefix and its checks: the
prefix must end in "/" (so that "db/" never touches "db2/"), and the empty
prefix, a leading "/", "." and ".." segments and the like are refused before
anything is listed. Versions under S3 Object Lock are never deleted: they
stay, and the command fails naming how many and until when.

Without --yes it prints the plan (objects and bytes) and deletes nothing; on
a terminal it asks first, naming them, and lists the prefix again before it
deletes: if what is there changed since the question, it deletes nothing.
A deletion on a terminal shows its progress.`,
		Example: fmt.Sprintf(`  # What would go
  %[1]s prefix rm s3://backups/db-1/?region=eu-west-1
  # Delete it, credentials from the controllers' Secret
  %[1]s prefix rm s3://backups/db-1/ --secret prod/s3-creds --yes`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, w := cmd.Context(), e.streams.Out
			bucketURL, prefix, err := splitPrefixURL(args[0])
			if err != nil {
				return err
			}
			// Refused before anything is opened or listed.
			if err := backupstore.CheckPrefix(prefix, backupstore.PrefixRules{}); err != nil {
				return usageError{fmt.Errorf("URL %q: prefix %q: %w", args[0], prefix, err)}
			}
			b, _, _, err := f.open(ctx, e, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			plan := func() (*backupstore.DeleteResult, error) {
				res, err := backupstore.DeletePrefix(ctx, b, prefix, &backupstore.DeleteOptions{DryRun: true})
				if err != nil {
					return nil, fmt.Errorf("%s: %w", args[0], err)
				}
				return res, nil
			}
			p, err := plan()
			if err != nil {
				return err
			}
			what := planText(p)
			if p.Listed == 0 {
				fmt.Fprintf(w, "%s: nothing under prefix %q of %s: nothing to do\n", args[0], prefix, bucketURL)
				return nil
			}
			fmt.Fprintf(w, "%s: delete %s under prefix %q of %s\n", args[0], what, prefix, bucketURL)
			if !yes {
				ok, err := e.confirm(fmt.Sprintf("delete %s?", what))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(w, "dry run: nothing deleted (run with --yes to delete %s)\n", what)
					return nil
				}
				// Re-check at the act: the answer was about what was
				// listed then.
				again, err := plan()
				if err != nil {
					return err
				}
				if again.Listed != p.Listed || again.Bytes != p.Bytes {
					return fmt.Errorf("%s: the prefix changed since the question (now %s): nothing deleted; run again", args[0], planText(again))
				}
			}
			opts := &backupstore.DeleteOptions{}
			var bar *progressBar
			if isTerminal(w) {
				bar = &progressBar{w: w, total: p.Listed}
				opts.Progress = bar.update
			}
			res, err := backupstore.DeletePrefix(ctx, b, prefix, opts)
			bar.end()
			if err != nil {
				var ret *backupstore.RetainedError
				if errors.As(err, &ret) {
					when := "every one is under a legal hold: waiting does not help"
					if !ret.RetryAt.IsZero() {
						when = "a rerun can delete more at " + stamp(ret.RetryAt)
					}
					return fmt.Errorf("%s: %d versions are kept by S3 Object Lock, the rest is deleted; %s: %w", args[0], len(ret.Objects), when, backupstore.ErrRetained)
				}
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprintf(w, "%s: deleted %d objects (%s)\n", args[0], res.Deleted, size(res.DeletedBytes))
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "delete without asking (otherwise a dry run, or a question on a terminal)")
	return cmd
}

// planText names what a dry run found: objects, or versions and delete
// markers, and bytes.
func planText(p *backupstore.DeleteResult) string {
	if p.Versioned {
		return fmt.Sprintf("%d versions and delete markers of %d keys (%s)", p.Listed, len(p.Keys), size(p.Bytes))
	}
	return fmt.Sprintf("%d objects (%s)", p.Listed, size(p.Bytes))
}

// progressBar draws DeletePrefix's progress on one terminal line.
type progressBar struct {
	w     io.Writer
	total int64
	drawn bool
}

func (p *progressBar) update(d backupstore.DeleteProgress) {
	total := max(p.total, d.Listed)
	const width = 30
	done := 0
	if total > 0 {
		done = int(d.Deleted * width / total)
	}
	done = min(done, width)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d objects, %s deleted", strings.Repeat("#", done), strings.Repeat(".", width-done), d.Deleted, total, size(d.DeletedBytes))
	p.drawn = true
}

// end ends the bar's line; a nil bar does nothing.
func (p *progressBar) end() {
	if p != nil && p.drawn {
		fmt.Fprintln(p.w)
	}
}
