//! Typed requests and responses.

pub mod agent;
pub mod cluster;
pub mod config;
pub mod ha;
pub mod node;
pub mod snapshot;
pub mod storage;
pub mod vm;

pub use agent::*;
pub use cluster::*;
pub use config::*;
pub use ha::*;
pub use node::*;
pub use snapshot::*;
pub use storage::*;
pub use vm::*;
