//! The API server double (the workspace crate `nodewright-apiserver-double`,
//! a test double of the Kubernetes API server) with nodewright's CRDs
//! installed: the double knows no custom resources of its own, and the
//! sandbox, the tests and the benchmarks all want NodePools, NodeClaims and
//! EC2NodeClasses served from the first request.

use apiserver_double::{ApiServer, ApiServerBuilder};

/// Settings for a double that serves nodewright's NodePool, NodeClaim and
/// EC2NodeClass (from [`crate::apis::crds::definitions`]).
pub fn builder() -> ApiServerBuilder {
    ApiServer::builder().crds(crate::apis::crds::definitions())
}

/// A double with nodewright's CRDs and default settings.
pub fn server() -> ApiServer {
    builder().build()
}
