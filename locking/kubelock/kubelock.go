package kubelock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/internal/txnbuf"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock/internal/configmapkey"
)

// Client is what a Backend needs of the API server: one ConfigMap, read,
// created and updated. GetConfigMap must read from the API server, not
// from a cache: the backend's transactions start from that read. Errors
// must keep their Kubernetes API type (apierrors.IsNotFound, IsConflict).
// ClientGo adapts a client-go clientset; crt/locks.ConfigMaps a controller-runtime
// client and API reader.
type Client interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
	UpdateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
}

// ClientGo returns the Client of a client-go typed client, e.g.
// clientset.CoreV1().
func ClientGo(c corev1client.ConfigMapsGetter) Client { return clientGo{c} }

type clientGo struct{ c corev1client.ConfigMapsGetter }

func (c clientGo) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return c.c.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c clientGo) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return c.c.ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
}

func (c clientGo) UpdateConfigMap(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return c.c.ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
}

// Config configures a Backend. Client, Namespace and Name are required.
// Instances that coordinate must use the same ConfigMap.
type Config struct {
	// Client reads and writes the ConfigMap: ClientGo(clientset.CoreV1())
	// or crt/locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()).
	Client Client

	// Namespace and Name name the ConfigMap that holds every key. It is
	// created on the first write.
	Namespace, Name string

	// Labels are set on the ConfigMap when the backend creates it. They are
	// not changed on an existing ConfigMap.
	Labels map[string]string

	// Owner, when set, is the ConfigMap's owner reference when the backend
	// creates it (an existing ConfigMap keeps its own): with the object
	// whose lock it is as owner, the garbage collector deletes the lock
	// with the object. A namespaced owner must be in Namespace. ForObject
	// sets it.
	Owner *metav1.OwnerReference
}

// ForObject is the Config of a lock of one object, such as the database
// an operator reconfigures: its ConfigMap is in the object's namespace,
// named after the object's kind and name ("<kind>-<name>-lock", lower
// case; a name too long for that ends in a hash of the whole instead),
// and owned by the object (Config.Owner, with the object as controller),
// so that it is deleted with it. obj must have its UID (read it from the
// API server) and gvk must be its kind.
//
// A controller whose builder also Owns(&corev1.ConfigMap{}) is called for
// the object whenever its lock changes: an instance waiting for the lock
// is woken by its release, not only when the holder's lease would end.
func ForObject(c Client, obj metav1.Object, gvk schema.GroupVersionKind) (Config, error) {
	if obj.GetUID() == "" || obj.GetName() == "" {
		return Config{}, fmt.Errorf("%w: kubelock: ForObject: %s %q has no UID or name: read it from the API server", locking.ErrInvalidConfig, gvk.Kind, obj.GetName())
	}
	if gvk.Kind == "" || gvk.Version == "" {
		return Config{}, fmt.Errorf("%w: kubelock: ForObject: the object's kind is %q: give its group, version and kind", locking.ErrInvalidConfig, gvk.String())
	}
	return Config{
		Client: c, Namespace: obj.GetNamespace(), Name: lockName(gvk.Kind, obj.GetName()),
		Labels: map[string]string{LabelLockOf: lockName(gvk.Kind, obj.GetName())},
		Owner: &metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true)},
	}, nil
}

// LabelLockOf, on a ConfigMap that ForObject names, is the ConfigMap's own
// name: `kubectl get configmap -l groundskeeper.io/lock-of` lists the locks.
const LabelLockOf = "groundskeeper.io/lock-of"

// lockName is "<kind>-<name>-lock" in lower case, a DNS subdomain and a
// label value (63 characters at most): a longer one is cut and ends in 8
// hex digits of the SHA-256 of the whole.
func lockName(kind, name string) string {
	full := strings.ToLower(kind) + "-" + name + "-lock"
	if len(full) <= validation.LabelValueMaxLength {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return strings.TrimRight(full[:validation.LabelValueMaxLength-9], "-.") + "-" + hex.EncodeToString(sum[:4])
}

// blindAttempts bounds the commits of a transaction that read nothing: its
// writes do not depend on the object, so a conflict only means the object
// changed in between, and they are applied again to the new version.
const blindAttempts = 5

// Backend is a locking.Backend that keeps every key in one ConfigMap. It is
// safe for concurrent use.
type Backend struct {
	client    Client
	namespace string
	name      string
	labels    map[string]string
	owner     []metav1.OwnerReference

	mu   sync.Mutex
	last *corev1.ConfigMap // the last version read or written, for As
}

var _ locking.Backend = (*Backend)(nil)

// New validates cfg and returns a backend that keeps its keys in the
// ConfigMap cfg.Namespace/cfg.Name.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: kubelock: Config.Client is nil", locking.ErrInvalidConfig)
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("%w: kubelock: Config.Namespace = %q: %s", locking.ErrInvalidConfig, cfg.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(cfg.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%w: kubelock: Config.Name = %q: %s", locking.ErrInvalidConfig, cfg.Name, strings.Join(errs, "; "))
	}
	if o := cfg.Owner; o != nil && (o.APIVersion == "" || o.Kind == "" || o.Name == "" || o.UID == "") {
		return nil, fmt.Errorf("%w: kubelock: Config.Owner = %s %s %q (UID %q): every field of the reference is required", locking.ErrInvalidConfig, o.APIVersion, o.Kind, o.Name, o.UID)
	}
	b := &Backend{client: cfg.Client, namespace: cfg.Namespace, name: cfg.Name, labels: maps.Clone(cfg.Labels)}
	if cfg.Owner != nil {
		b.owner = []metav1.OwnerReference{*cfg.Owner}
	}
	return b, nil
}

// As supports *Client (Config.Client) and
// **corev1.ConfigMap (a copy of the last version of the ConfigMap this
// backend read or wrote; false if none yet).
func (b *Backend) As(i any) bool {
	switch p := i.(type) {
	case *Client:
		*p = b.client
		return true
	case **corev1.ConfigMap:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.last == nil {
			return false
		}
		*p = b.last.DeepCopy()
		return true
	}
	return false
}

func (b *Backend) remember(cm *corev1.ConfigMap) {
	if cm == nil {
		return
	}
	b.mu.Lock()
	b.last = cm
	b.mu.Unlock()
}

func (b *Backend) ref() string { return b.namespace + "/" + b.name }

// Update runs fn in a transaction; see locking.Backend.
//
// The first read GETs the ConfigMap (a quorum read), and every read of the
// transaction is answered from that version: the snapshot. Writes are
// buffered, then applied to the snapshot and written with an update that
// carries the snapshot's resourceVersion, so the API server refuses it if
// the object changed since; a create, if it did not exist, is refused if
// another instance created it meanwhile. Either refusal is
// locking.ErrConflict.
//
// Conflicts are detected per object, not per key: a transaction conflicts
// with any concurrent commit to the ConfigMap, even one that wrote keys it
// did not read. That is sound (never a missed conflict) and, for a lock
// whose transactions all read the lock key, costs nothing.
func (b *Backend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	tx := &txn{b: b}
	tx.Backend = "kubelock"
	tx.CheckKey = func(key []byte) error {
		if err := configmapkey.Check(key); err != nil {
			return fmt.Errorf("kubelock: %w", err)
		}
		return nil
	}
	return tx.Run(ctx, tx, fn, tx.commit)
}

type txn struct {
	b *Backend

	// Txn holds the writes and the guard; Set, Clear and ClearPrefix are
	// its.
	txnbuf.Txn

	loaded bool
	obj    *corev1.ConfigMap // the snapshot; nil if absent or not loaded
	data   map[string][]byte // the snapshot's decoded keys

}

// load reads the snapshot on first use.
func (t *txn) load(ctx context.Context) error {
	if t.loaded {
		return nil
	}
	obj, data, err := t.b.get(ctx)
	if err != nil {
		return err
	}
	t.obj, t.data, t.loaded = obj, data, true
	return nil
}

// get reads the ConfigMap; nil if it does not exist.
func (b *Backend) get(ctx context.Context) (*corev1.ConfigMap, map[string][]byte, error) {
	obj, err := b.client.GetConfigMap(ctx, b.namespace, b.name)
	if apierrors.IsNotFound(err) {
		return nil, map[string][]byte{}, nil
	}
	if err != nil {
		return nil, nil, translateRead(ctx, "get ConfigMap "+b.ref(), err)
	}
	b.remember(obj)
	return obj, decodeData(obj.BinaryData), nil
}

func (t *txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := t.Lock(); err != nil {
		return nil, false, err
	}
	defer t.Unlock()
	if v, ok, decided := t.Buf.Lookup(key); decided {
		return v, ok, nil
	}
	if err := t.load(ctx); err != nil {
		return nil, false, err
	}
	v, ok := t.data[string(key)]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

func (t *txn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	if err := t.Lock(); err != nil {
		return nil, err
	}
	defer t.Unlock()
	if err := t.load(ctx); err != nil {
		return nil, err
	}
	var stored []locking.KeyValue
	for k, v := range t.data {
		if strings.HasPrefix(k, string(prefix)) {
			stored = append(stored, locking.KeyValue{Key: []byte(k), Value: v})
		}
	}
	return t.Buf.Merge(prefix, stored), nil
}

func (t *txn) commit(ctx context.Context) error {
	if err := t.Lock(); err != nil {
		return err
	}
	defer t.Unlock()
	if t.Buf.Empty() {
		return nil // read-only: all reads came from one version
	}
	if t.loaded {
		return t.b.write(ctx, t.obj, t.data, t.Buf.Ops())
	}
	// Blind writes: apply them to the current version, again if it changed.
	var err error
	for range blindAttempts {
		var (
			obj  *corev1.ConfigMap
			data map[string][]byte
		)
		if obj, data, err = t.b.get(ctx); err != nil {
			return err
		}
		err = t.b.write(ctx, obj, data, t.Buf.Ops())
		if !errors.Is(err, locking.ErrConflict) {
			return err
		}
	}
	return err
}

// write applies ops to data, the decoded keys of obj (nil: absent), and
// stores the result conditionally on obj's resourceVersion.
func (b *Backend) write(ctx context.Context, obj *corev1.ConfigMap, data map[string][]byte, ops []txnbuf.Op) error {
	next := maps.Clone(data)
	txnbuf.ApplyMap(next, ops, nil)
	var (
		written *corev1.ConfigMap
		err     error
		verb    string
	)
	if obj == nil {
		verb = "create"
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.namespace, Labels: maps.Clone(b.labels), OwnerReferences: slices.Clone(b.owner)},
			BinaryData: encodeData(next, nil),
		}
		written, err = b.client.CreateConfigMap(ctx, cm)
	} else {
		verb = "update"
		cm := obj.DeepCopy() // keeps its resourceVersion: the precondition
		cm.BinaryData = encodeData(next, obj.BinaryData)
		written, err = b.client.UpdateConfigMap(ctx, cm)
	}
	if err != nil {
		return translateWrite(ctx, verb+" ConfigMap "+b.ref(), err)
	}
	b.remember(written)
	return nil
}

// decodeData decodes the binaryData keys that are encoded lock keys;
// others are not the lock's and are ignored (and kept by encodeData).
func decodeData(bd map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(bd))
	for k, v := range bd {
		if key, err := configmapkey.Decode(k); err == nil {
			out[string(key)] = nonNil(v)
		}
	}
	return out
}

// encodeData encodes data as binaryData, keeping the entries of old whose
// keys are not encoded lock keys.
func encodeData(data map[string][]byte, old map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(data))
	for k, v := range old {
		if _, err := configmapkey.Decode(k); err != nil {
			out[k] = v
		}
	}
	for k, v := range data {
		out[configmapkey.Encode([]byte(k))] = nonNil(v)
	}
	return out
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return bytes.Clone(b)
}

// translateRead maps a failed GET to the package's errors. Nothing was
// written.
func translateRead(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("kubelock: %s: %w", what, cerr)
	}
	if definite(err) {
		return fmt.Errorf("kubelock: %s: %w", what, apiError{err})
	}
	return fmt.Errorf("kubelock: %s: %w: %w", what, locking.ErrUnavailable, apiError{err})
}

// translateWrite maps a failed create or update to the package's errors.
// Unless the API server answered that it refused the write, it may have
// been applied.
func translateWrite(ctx context.Context, what string, err error) error {
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
		// Another instance wrote (or created, or deleted) the ConfigMap
		// after our snapshot.
		return fmt.Errorf("kubelock: %s: changed since it was read: %w (%w)", what, locking.ErrConflict, apiError{err})
	case apierrors.IsTooManyRequests(err):
		// Rejected by the API server's flow control before processing.
		return fmt.Errorf("kubelock: %s: %w: %w", what, locking.ErrUnavailable, apiError{err})
	case definite(err) && ctx.Err() == nil:
		return fmt.Errorf("kubelock: %s: %w", what, apiError{err})
	case ctx.Err() != nil:
		return fmt.Errorf("kubelock: %s: %w: %w (%w)", what, locking.ErrUnknownResult, locking.ErrUnavailable, ctx.Err())
	}
	return fmt.Errorf("kubelock: %s: %w: %w: %w", what, locking.ErrUnknownResult, locking.ErrUnavailable, apiError{err})
}

// definite reports whether the API server refused the request for a reason
// retrying will not cure, before applying it.
func definite(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) ||
		apierrors.IsUnsupportedMediaType(err) || apierrors.IsGone(err)
}

// apiError keeps the API server's error for errors.As, so that
// apierrors.IsForbidden, IsNotFound and the like work on what this package
// returns, while its text gives the status's message, code and reason:
// callers need not know apimachinery to read it, and need not parse it to
// test it.
type apiError struct{ err error }

func (e apiError) Error() string { return message(e.err) }
func (e apiError) Unwrap() error { return e.err }

// message is the error's text, with the status code and reason of an API
// error.
func message(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return fmt.Sprintf("%s (HTTP %d, reason %s)", s.Message, s.Code, s.Reason)
	}
	return err.Error()
}
