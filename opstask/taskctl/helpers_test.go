package taskctl_test

import "k8s.io/apimachinery/pkg/runtime"

func toMap(v any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(v)
}
