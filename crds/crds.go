// Package crds holds the CustomResourceDefinitions controller-gen generates
// from the markers of api/v1alpha1 (make manifests), embedded so that Go code
// can apply the schema itself: v1alpha1's Default applies the StorageTuning
// CRD's structural defaults, the ones the API server applies.
package crds

import _ "embed"

// File names of the generated CRDs in this directory.
const (
	StorageTuningFile    = "storage.shadowtune.io_storagetunings.yaml"
	NodeStorageStateFile = "storage.shadowtune.io_nodestoragestates.yaml"
)

//go:embed storage.shadowtune.io_storagetunings.yaml
var storageTuning []byte

// StorageTuning returns the StorageTuning CRD (StorageTuningFile), YAML.
// The slice is a copy the caller may keep.
func StorageTuning() []byte { return append([]byte(nil), storageTuning...) }
