//! pve-sim: a faithful Proxmox VE API simulator (8.4 by default, or 9.1) for development, tests,
//! demos and load tests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), pve_sim::SimError> {
//! let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default()).await?;
//! println!("{} {}", sim.url(), sim.token_id());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod access;
pub mod api;
pub mod auth;
pub mod config_keys;
pub mod devices;
pub mod error;
pub mod fileserver;
pub mod formats;
pub mod iso;
pub mod multipart;
pub mod params;
pub mod propstr;
pub mod redact;
pub mod scenario;
pub mod schema;
pub mod server;
pub mod state;
pub mod tasks;
pub mod tls;
pub mod validate;
pub mod version;

pub use error::ApiError;
pub use scenario::{
    AclSpec, CloudInitResult, DhcpSpec, EndpointFault, FaultSpec, GuestSpec, HaGroupSpec, LatencySpec,
    Profile, Scenario,
};
pub use server::{SimConfig, SimError, SimServer, VERSION_ENV};
pub use state::{Cluster, HaResource, Leftovers, PowerState, SimState, VmView, VolumeRef};
pub use version::PveVersion;
