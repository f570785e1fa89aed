//! API handlers and the route table.

pub mod agent;
pub mod cluster;
pub mod config;
pub mod create;
pub mod download;
pub mod ha;
pub mod ha_rules;
pub mod hotplug;
pub mod import;
pub mod nodes;
pub mod power;
pub mod qemu;
mod routes;
pub mod snapshot;
pub(crate) mod specs;
pub mod storage;

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::params::Params;
use crate::state::SimState;
use crate::version::PveVersion;
pub use routes::{ENDPOINT_KEYS, route, serves};

/// What a handler sees besides its parameters.
pub struct Ctx {
    /// Cluster state.
    pub state: SimState,
    /// Authenticated user id or token id (empty for the login call).
    pub user: String,
    /// The uploaded file (upload endpoint only).
    pub upload: Option<storage::UploadFile>,
    /// The Proxmox VE release played.
    pub version: PveVersion,
}

/// A successful answer: `data`, plus `total` for some list endpoints.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The `data` value.
    pub data: Value,
    /// Optional top-level `total`.
    pub total: Option<usize>,
}

impl Reply {
    /// Plain data.
    pub fn data(data: Value) -> Self {
        Self { data, total: None }
    }
}

/// Result of a handler.
pub type HandlerResult = Result<Reply, ApiError>;
/// A handler.
pub type Handler = fn(&Ctx, &Params) -> HandlerResult;
/// A parameter validator.
pub type Validator = fn(&mut Map<String, Value>, PveVersion) -> Result<(), ApiError>;

/// A matched route.
pub struct Route {
    /// Endpoint key, e.g. `GET /nodes/{node}/qemu/{vmid}/config`.
    pub key: &'static str,
    /// Handler.
    pub handler: Handler,
    /// Validator.
    pub validate: Validator,
    /// Path parameters.
    pub path_params: Vec<(&'static str, String)>,
}

pub(crate) fn mk(
    key: &'static str,
    handler: Handler,
    validate: Validator,
    path_params: Vec<(&'static str, String)>,
) -> Option<Route> {
    Some(Route {
        key,
        handler,
        validate,
        path_params,
    })
}

/// `hostname lookup` failure for an unknown node (PVE tries to proxy to it).
/// An offline member gives 595 (the proxy cannot reach it).
pub fn check_node(ctx: &Ctx, node: &str) -> Result<(), ApiError> {
    match ctx.state.with(|c| c.nodes.get(node).map(|n| n.online)) {
        Some(true) => Ok(()),
        Some(false) => Err(ApiError::status(
            595,
            "Errors during connection establishment, proxy handshake: No route to host",
        )),
        None => Err(ApiError::server(format!(
            "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
        ))),
    }
}
