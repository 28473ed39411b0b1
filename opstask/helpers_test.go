package opstask_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"time"
)

func metaTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
