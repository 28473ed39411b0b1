package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion of BackupBucket, BackupEntry and Shoot.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// SchemeBuilder registers the types of this package; AddToScheme adds them
// to a scheme, so that a controller-runtime client reads and writes them
// typed. (apimachinery's builder, not controller-runtime's: an api package
// should be cheap to import.)
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &BackupBucket{}, &BackupBucketList{}, &BackupEntry{}, &BackupEntryList{}, &Shoot{}, &ShootList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
