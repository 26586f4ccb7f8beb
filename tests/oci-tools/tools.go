//go:build tools

// Package tools pins the OCI tools the tests run (scripts/oci-tools builds
// them): cosign, which signs modules as users sign them, and the CNCF
// distribution registry they are pushed to.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)
