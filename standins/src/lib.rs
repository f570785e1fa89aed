//! Stand-ins for the controllers a capmox-rs deployment relies on but does not ship, for tests
//! and the demo: core Cluster API (the parts the provider depends on, [`capi`]) and the in-cluster
//! IPAM provider ([`ipam`]). They run in-process against any Kubernetes API (usually `testenv`)
//! and are deliberately small: they are not replacements for the real controllers.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) {
//! let ipam = capmox_standins::ipam::InClusterIpamStandIn::spawn(client.clone(), None);
//! // ... create pools and claims, watch them get addresses ...
//! ipam.stop().await;
//! # }
//! ```

pub mod capi;
pub mod crds;
pub mod error;
pub mod ipam;
pub mod meta;

mod handle;

pub use capi::CapiStandIn;
pub use error::StandInError;
pub use handle::StandInHandle;
pub use ipam::InClusterIpamStandIn;

/// Both stand-ins, started together.
#[derive(Debug)]
pub struct StandIns {
    /// The core Cluster API stand-in.
    pub capi: StandInHandle,
    /// The in-cluster IPAM provider stand-in.
    pub ipam: StandInHandle,
}

impl StandIns {
    /// Starts [`CapiStandIn`] and [`InClusterIpamStandIn`] for `namespace` (all when `None`).
    pub fn spawn(client: kube::Client, namespace: Option<String>) -> Self {
        Self {
            capi: CapiStandIn::spawn(client.clone(), namespace.clone()),
            ipam: InClusterIpamStandIn::spawn(client, namespace),
        }
    }

    /// Stops both and waits for them.
    pub async fn stop(self) {
        self.capi.stop().await;
        self.ipam.stop().await;
    }
}
