module github.com/groundskeeper-io/groundskeeper/locking/fdblock

go 1.26.0

require (
	github.com/apple/foundationdb/bindings/go v0.0.0-20260629183922-51e1c42eb9a8
	github.com/groundskeeper-io/groundskeeper v0.0.0-00010101000000-000000000000
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab // indirect
)

// The parent module at the same commit: this module is built and released
// together with it.
replace github.com/groundskeeper-io/groundskeeper => ../..
