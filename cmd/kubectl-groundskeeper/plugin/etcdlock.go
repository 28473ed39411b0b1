package plugin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
)

// etcdFlags name a lock kept in etcd (locking/etcdlock) and how to reach
// it, with etcdctl's TLS flags.
type etcdFlags struct {
	endpoints             []string
	prefix                string
	caFile, certFile, key string
	dialTimeout           time.Duration
	insecure              bool
}

func (f *etcdFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "etcd-endpoints", nil, "the etcd endpoints of a lock kept in etcd (locking/etcdlock), comma-separated URLs (http://host:2379, https://host:2379); --configmap is then not used")
	fl.StringVar(&f.prefix, "etcd-prefix", "", "the etcd key prefix of the lock (etcdlock.Config.Prefix): the lock's keys are stored under it")
	fl.StringVar(&f.caFile, "etcd-cacert", "", "verify the etcd servers' certificates with this CA bundle (PEM)")
	fl.StringVar(&f.certFile, "etcd-cert", "", "the client certificate for etcd (PEM), with --etcd-key")
	fl.StringVar(&f.key, "etcd-key", "", "the client certificate's key for etcd (PEM), with --etcd-cert")
	fl.BoolVar(&f.insecure, "etcd-insecure-skip-tls-verify", false, "do not verify the etcd servers' certificates (insecure)")
	fl.DurationVar(&f.dialTimeout, "etcd-dial-timeout", etcdlock.DefaultDialTimeout, "give up when no etcd endpoint answers within this long")
}

// tlsConfig returns the TLS configuration of the flags, nil when none is
// asked for.
func (f *etcdFlags) tlsConfig() (*tls.Config, error) {
	if f.caFile == "" && f.certFile == "" && f.key == "" && !f.insecure {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecure}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--etcd-cacert %s: %w", f.caFile, err)}
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageError{fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", f.caFile)}
		}
	}
	if (f.certFile == "") != (f.key == "") {
		return nil, usageError{fmt.Errorf("--etcd-cert %q and --etcd-key %q: give both or neither", f.certFile, f.key)}
	}
	if f.certFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.key)
		if err != nil {
			return nil, usageError{fmt.Errorf("--etcd-cert %s, --etcd-key %s: %w", f.certFile, f.key, err)}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// open returns a handle on the lock under the flags' etcd prefix, with the
// lock's own key prefix lockPrefix (locking.DefaultPrefix when empty). It
// makes sure an endpoint answers within the dial timeout.
func (f *etcdFlags) open(ctx context.Context, lockPrefix string) (*lockHandle, error) {
	for _, ep := range f.endpoints {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Errorf("--etcd-endpoints %s: want a URL such as http://host:2379 or https://host:2379", ep)}
		}
	}
	if f.dialTimeout <= 0 {
		return nil, usageError{fmt.Errorf("--etcd-dial-timeout %s: must be positive", f.dialTimeout)}
	}
	tc, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	ref := fmt.Sprintf("etcd prefix %q at %s", f.prefix, strings.Join(f.endpoints, ","))
	c, err := clientv3.New(clientv3.Config{Endpoints: f.endpoints, DialTimeout: f.dialTimeout, TLS: tc, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}
	if lockPrefix == "" {
		lockPrefix = locking.DefaultPrefix
	}
	keys := f.prefix + lockPrefix
	// The client connects lazily: one read, bounded by the dial timeout,
	// says now whether an endpoint answers.
	probe, cancel := context.WithTimeout(ctx, f.dialTimeout)
	_, err = c.Get(probe, keys, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		c.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("lock %s: no endpoint answered within %s (--etcd-dial-timeout)", ref, f.dialTimeout)
		}
		return nil, fmt.Errorf("lock %s: %w", ref, err)
	}
	b, err := etcdlock.New(etcdlock.Config{KV: c, Prefix: f.prefix})
	if err == nil {
		var l *locking.Lock
		if l, err = locking.New(locking.Config{Backend: b, LockID: readerID, Prefix: lockPrefix}); err == nil {
			return &lockHandle{
				lock: l, ref: ref, short: "etcd:" + f.prefix,
				view:    LockView{EtcdEndpoints: f.endpoints, EtcdPrefix: f.prefix},
				changes: func(ctx context.Context) (<-chan error, error) { return watchEtcd(ctx, c, keys) },
				close:   func() { c.Close() },
			}, nil
		}
	}
	c.Close()
	return nil, fmt.Errorf("lock %s: %w", ref, err)
}

// watchEtcd watches every key under keys from the revision of a read made
// before it returns, so that no later change is missed.
func watchEtcd(ctx context.Context, c *clientv3.Client, keys string) (<-chan error, error) {
	r, err := c.Get(ctx, keys, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, err
	}
	wc := c.Watch(clientv3.WithRequireLeader(ctx), keys, clientv3.WithPrefix(), clientv3.WithRev(r.Header.Revision+1))
	ch := make(chan error, 1)
	go func() {
		defer close(ch)
		for resp := range wc {
			// A canceled watch (a compacted revision, a lost leader) ends
			// the channel after this response; its error ends the command.
			if err := resp.Err(); err != nil {
				select {
				case <-ch: // a change the error makes moot
				default:
				}
				ch <- err
				return
			}
			if len(resp.Events) == 0 {
				continue
			}
			select {
			case ch <- nil:
			default: // a reread is pending already
			}
		}
	}()
	return ch, nil
}
