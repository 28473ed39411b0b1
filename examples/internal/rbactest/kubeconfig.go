package rbactest

import (
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns the path of a kubeconfig file for a program that
// builds its clients from one (a command's --kubeconfig), which Wrap cannot
// reach: it names a proxy, served until the test ends, that sends each
// request on to cfg's API server with cfg's credentials through r.Wrap(cfg),
// so that every request of the program is recorded in r, as it was sent.
func (r *Recorder) Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	target, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(r.Wrap(cfg))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: rt,
		// Watches stream their events as they come.
		FlushInterval: -1,
	})
	t.Cleanup(func() {
		// A program still watching would keep Close waiting.
		srv.CloseClientConnections()
		srv.Close()
	})
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["recorded"] = &clientcmdapi.Cluster{Server: srv.URL}
	kubeconfig.AuthInfos["recorded"] = &clientcmdapi.AuthInfo{}
	kubeconfig.Contexts["recorded"] = &clientcmdapi.Context{Cluster: "recorded", AuthInfo: "recorded"}
	kubeconfig.CurrentContext = "recorded"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}
