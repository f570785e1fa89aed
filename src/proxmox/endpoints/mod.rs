//! Endpoint methods on [`Client`](super::Client), grouped by area.

pub mod agent;
pub mod cluster;
pub mod ha;
pub mod nodes;
pub mod operate;
pub mod power;
pub mod snapshot;
pub mod storage;
pub mod vm;

use super::error::Error;
use super::task::Upid;

/// Parses the UPID string an asynchronous call returned.
pub(crate) fn upid(data: String) -> Result<Upid, Error> {
    Upid::parse(&data)
}

/// Parses an optional UPID (`null` when PVE finished the work synchronously).
pub(crate) fn opt_upid(data: Option<String>) -> Result<Option<Upid>, Error> {
    data.filter(|s| !s.is_empty())
        .map(|s| Upid::parse(&s))
        .transpose()
}
