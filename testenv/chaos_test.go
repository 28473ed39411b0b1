package testenv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// eventually polls f every 200 ms until it returns nil or timeout passes,
// and fails the test with f's last error.
func eventually(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last = f(attempt)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
	return time.Since(start)
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestControlPlaneFaults injects one fault after another into a control plane
// of its own, and shows that each is survived the way a cluster survives it.
// The steps share the control plane (starting one costs seconds) and run in
// order.
func TestControlPlaneFaults(t *testing.T) {
	k := testenv.StartIsolatedKubernetes(t)
	cms := k.Client.CoreV1().ConfigMaps(k.Namespace)
	ctx := context.Background()
	create := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := cms.Create(ctx, configMap(name), metav1.CreateOptions{})
			return err
		}
	}

	t.Run("etcd restarted under a running API server: data kept, writes resume", func(t *testing.T) {
		eventually(t, 30*time.Second, "create before", create("before-etcd-restart"))
		if err := k.Etcd.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cms.Create(short, configMap("while-etcd-down"), metav1.CreateOptions{})
		cancel()
		if err == nil {
			t.Fatal("create with etcd stopped succeeded")
		}
		t.Logf("create with etcd stopped: %v", err)
		if err := k.Etcd.Start(ctx); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, 30*time.Second, "create after etcd restart", create("after-etcd-restart"))
		t.Logf("writes resumed %s after etcd was ready", took)
		if _, err := cms.Get(ctx, "before-etcd-restart", metav1.GetOptions{}); err != nil {
			t.Fatalf("object written before the restart: %v", err)
		}
	})

	t.Run("kube-apiserver restarted: the same client reconnects and an informer's watch resumes", func(t *testing.T) {
		seen := make(chan string, 100)
		factory := informers.NewSharedInformerFactoryWithOptions(k.Client, 0, informers.WithNamespace(k.Namespace))
		informer := factory.Core().V1().ConfigMaps().Informer()
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { seen <- obj.(*corev1.ConfigMap).Name },
		}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer func() { close(stop); factory.Shutdown() }()
		factory.Start(stop)
		if !cache.WaitForCacheSync(stop, informer.HasSynced) {
			t.Fatal("informer did not sync")
		}
		waitSeen := func(name string) {
			t.Helper()
			timeout := time.After(60 * time.Second)
			for {
				select {
				case got := <-seen:
					if got == name {
						return
					}
				case <-timeout:
					t.Fatalf("informer did not see %s within 60s", name)
				}
			}
		}
		eventually(t, 30*time.Second, "create before", create("before-apiserver-restart"))
		waitSeen("before-apiserver-restart")

		start := time.Now()
		if err := k.APIServer.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("API server restarted in %s", time.Since(start).Round(time.Millisecond))
		took := eventually(t, 30*time.Second, "create after API server restart", create("after-apiserver-restart"))
		t.Logf("the client's writes resumed %s after the API server was ready", took)
		waitSeen("after-apiserver-restart")
		t.Logf("the informer saw the new object %s after the restart began", time.Since(start).Round(time.Millisecond))
	})

	t.Run("kube-controller-manager killed and started: the garbage collector deletes a dependent", func(t *testing.T) {
		var owner *corev1.ConfigMap
		eventually(t, 30*time.Second, "create owner", func(ctx context.Context) (err error) {
			owner, err = cms.Create(ctx, configMap("owner"), metav1.CreateOptions{})
			return err
		})
		dependent := configMap("dependent")
		dependent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		if _, err := cms.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := k.ControllerManager.Kill(); err != nil {
			t.Fatal(err)
		}
		if k.ControllerManager.Running() {
			t.Fatal("controller manager running after Kill")
		}
		if err := k.ControllerManager.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, 60*time.Second, "dependent deleted", func(ctx context.Context) error {
			_, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
			if err == nil {
				return errors.New("dependent still exists")
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
		t.Logf("dependent deleted %s after its owner", took)
	})

	t.Run("API server blackholed: requests time out, then succeed when lifted", func(t *testing.T) {
		p := faultproxy.Start(t, strings.TrimPrefix(k.Config.Host, "https://"))
		config := k.ConfigVia(p)
		config.Timeout = time.Second
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		through := client.CoreV1().ConfigMaps(k.Namespace)
		if _, err := through.Create(ctx, configMap("through-proxy"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p.SetBlackhole(true)
		start := time.Now()
		_, err = through.Get(ctx, "through-proxy", metav1.GetOptions{})
		if err == nil {
			t.Fatal("get through a blackholed proxy succeeded")
		}
		if !isTimeout(err) {
			t.Fatalf("get through a blackholed proxy: %v, want a timeout", err)
		}
		t.Logf("get through the blackhole failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
		// The direct client is not affected.
		if _, err := cms.Get(ctx, "through-proxy", metav1.GetOptions{}); err != nil {
			t.Fatalf("direct get during the blackhole: %v", err)
		}
		p.SetBlackhole(false)
		eventually(t, 30*time.Second, "get after the blackhole was lifted", func(ctx context.Context) error {
			_, err := through.Get(ctx, "through-proxy", metav1.GetOptions{})
			return err
		})
	})

	t.Run("API server's etcd blackholed: writes time out, then resume when lifted", func(t *testing.T) {
		k.EtcdProxy.SetBlackhole(true)
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cms.Create(short, configMap("while-etcd-blackholed"), metav1.CreateOptions{})
		cancel()
		if err == nil {
			t.Fatal("create with etcd blackholed succeeded")
		}
		t.Logf("create with etcd blackholed: %v", err)
		k.EtcdProxy.SetBlackhole(false)
		eventually(t, 30*time.Second, "create after etcd's blackhole was lifted", create("after-etcd-blackhole"))
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// putGet is what a test needs of one object store: write a key, read it.
type putGet struct {
	put func(ctx context.Context, key, value string) error
	get func(ctx context.Context, key string) (string, error)
}

// TestObjectStoreRestarts shows, per store of its own, what survives an
// orderly restart (SIGTERM) and a crash (SIGKILL); testenv/doc.go
// states the same.
func TestObjectStoreRestarts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (*testenv.IsolatedBlobStore, putGet)
		// survivesKill is false for stores that may lose writes in a
		// crash.
		survivesKill bool
	}{
		{"MinIO", startS3, true},
		{"fake-gcs-server", startGCS, true},
		{"Azurite", startAzure, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, kv := tc.start(t)
			ctx := context.Background()
			eventually(t, 30*time.Second, "put", func(ctx context.Context) error { return kv.put(ctx, "a", "kept") })

			start := time.Now()
			if err := s.Server.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("restarted in %s", time.Since(start).Round(time.Millisecond))
			check := func(key, want string) {
				t.Helper()
				eventually(t, 30*time.Second, "get "+key, func(ctx context.Context) error {
					got, err := kv.get(ctx, key)
					if err != nil {
						return err
					}
					if got != want {
						t.Fatalf("%s after restart = %q, want %q", key, got, want)
					}
					return nil
				})
			}
			check("a", "kept")

			eventually(t, 30*time.Second, "put", func(ctx context.Context) error { return kv.put(ctx, "b", "before kill") })
			if err := s.Server.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := s.Server.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.survivesKill {
				_, err := kv.get(ctx, "b")
				t.Logf("%s: write just before SIGKILL read back: %v (not promised)", tc.name, err)
				return
			}
			check("b", "before kill")
		})
	}
}

func startS3(t *testing.T) (*testenv.IsolatedBlobStore, putGet) {
	s := testenv.StartIsolatedS3(t, testenv.BucketOptions{})
	b := s.Open(t)
	return s, putGet{
		put: func(ctx context.Context, key, value string) error { return b.WriteAll(ctx, key, []byte(value), nil) },
		get: func(ctx context.Context, key string) (string, error) {
			data, err := b.ReadAll(ctx, key)
			return string(data), err
		},
	}
}

func startGCS(t *testing.T) (*testenv.IsolatedBlobStore, putGet) {
	s := testenv.StartIsolatedGCS(t, testenv.BucketOptions{})
	return s, putGet{
		put: func(ctx context.Context, key, value string) error {
			u := fmt.Sprintf("%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s", s.Endpoint, s.Bucket, url.QueryEscape(key))
			_, err := httpDo(ctx, http.MethodPost, u, value)
			return err
		},
		get: func(ctx context.Context, key string) (string, error) {
			u := fmt.Sprintf("%s/storage/v1/b/%s/o/%s?alt=media", s.Endpoint, s.Bucket, url.PathEscape(key))
			return httpDo(ctx, http.MethodGet, u, "")
		},
	}
}

func httpDo(ctx context.Context, method, u, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewBufferString(body))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, data)
	}
	return string(data), nil
}

func startAzure(t *testing.T) (*testenv.IsolatedBlobStore, putGet) {
	s := testenv.StartIsolatedAzure(t)
	cred, err := azblob.NewSharedKeyCredential(testenv.AzureAccount, testenv.AzureAccountKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential(s.Endpoint, cred, &azblob.ClientOptions{
		ClientOptions: policy.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, putGet{
		put: func(ctx context.Context, key, value string) error {
			_, err := client.UploadBuffer(ctx, s.Bucket, key, []byte(value), nil)
			return err
		},
		get: func(ctx context.Context, key string) (string, error) {
			resp, err := client.DownloadStream(ctx, s.Bucket, key, nil)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			return string(data), err
		},
	}
}
