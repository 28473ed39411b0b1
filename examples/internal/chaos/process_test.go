package chaos

import (
	"bytes"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A replica process reaches the API server its slot's config names, with
// the same credentials.
func TestWriteKubeconfig(t *testing.T) {
	cfg := &rest.Config{
		Host: "https://127.0.0.1:40997",
		TLSClientConfig: rest.TLSClientConfig{
			CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key"), ServerName: "kubernetes",
		},
		BearerToken: "token",
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != cfg.Host || got.ServerName != cfg.ServerName || got.BearerToken != cfg.BearerToken ||
		!bytes.Equal(got.CAData, cfg.CAData) || !bytes.Equal(got.CertData, cfg.CertData) || !bytes.Equal(got.KeyData, cfg.KeyData) {
		t.Fatalf("config read back from the kubeconfig differs:\n got  host %s server name %s token %q ca %q cert %q key %q\n want host %s server name %s token %q ca %q cert %q key %q",
			got.Host, got.ServerName, got.BearerToken, got.CAData, got.CertData, got.KeyData,
			cfg.Host, cfg.ServerName, cfg.BearerToken, cfg.CAData, cfg.CertData, cfg.KeyData)
	}
}
