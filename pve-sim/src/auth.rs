//! Authentication: API tokens, tickets with CSRF tokens, `POST /access/ticket`.

use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine;
use http::HeaderMap;
use rand::Rng;
use regex::Regex;
use serde_json::json;
use tokio::time::Instant;

use crate::api::{Ctx, Reply};
use crate::error::ApiError;
use crate::params::{Params, percent_decode};
use crate::state::{SimState, Ticket};

/// Ticket lifetime (2 h).
pub const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 3600);

/// Who made a request.
#[derive(Clone)]
pub struct Identity {
    /// User id, or full token id for tokens.
    pub id: String,
    /// Expected CSRF token (ticket auth only).
    pub csrf: Option<String>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

static TOKEN_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?:^|\s)PVEAPIToken(?:=| )([^;]*)").ok());
static TOKEN_ID_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[^\s:/@!]+@[A-Za-z][A-Za-z0-9\.\-_]+![A-Za-z][A-Za-z0-9\.\-_]+$").ok());

fn ticket_from(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all("cookie").iter().filter_map(|v| v.to_str().ok()) {
        for c in value.split(';').map(str::trim) {
            if let Some(t) = c.strip_prefix("PVEAuthCookie=") {
                return Some(percent_decode(t, false));
            }
        }
    }
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok())?;
    auth.trim()
        .strip_prefix("PVEAuthCookie=")
        .map(|t| percent_decode(t, false))
}

/// Authenticates a request from its headers.
pub fn authenticate(state: &SimState, headers: &HeaderMap) -> Result<Identity, ApiError> {
    if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok())
        && let Some(caps) = TOKEN_RE.as_ref().and_then(|re| re.captures(auth))
    {
        let value = percent_decode(caps.get(1).map(|m| m.as_str()).unwrap_or(""), false);
        let Some((id, secret)) = value.rsplit_once('=') else {
            return Err(ApiError::unauthorized("Authentication failed!"));
        };
        let valid = TOKEN_ID_RE.as_ref().is_some_and(|re| re.is_match(id))
            && state.with(|c| c.tokens.get(id).is_some_and(|s| s == secret));
        return if valid {
            Ok(Identity {
                id: id.to_string(),
                csrf: None,
            })
        } else {
            Err(ApiError::unauthorized("Authentication failed!"))
        };
    }
    let Some(ticket) = ticket_from(headers) else {
        return Err(ApiError::unauthorized("No ticket"));
    };
    state.with(|c| match c.tickets.get(&ticket) {
        Some(t) if t.expires > Instant::now() => Ok(Identity {
            id: t.userid.clone(),
            csrf: Some(t.csrf.clone()),
        }),
        _ => Err(ApiError::unauthorized("Authentication failed!")),
    })
}

/// `POST /access/ticket`: log in with a password (or renew with a valid ticket as password).
pub fn login(ctx: &Ctx, p: &Params) -> Result<Reply, ApiError> {
    let mut username = p.str("username").unwrap_or_default();
    if !username.contains('@')
        && let Some(realm) = p.str("realm")
    {
        username = format!("{username}@{realm}");
    }
    let password = p.str("password").unwrap_or_default();
    let now = Instant::now();
    let fail = || ApiError::status(401, "authentication failure");
    ctx.state.with(|c| {
        let renewal = c.tickets.get(&password).is_some_and(|t| t.userid == username && t.expires > now);
        let by_password = c.users.get(&username).is_some_and(|u| u.password.as_deref() == Some(password.as_str()));
        if !renewal && !by_password {
            return Err(fail());
        }
        let stamp = format!("{:08X}", crate::tasks::now_epoch());
        let sig: [u8; 32] = c.rng.random();
        let csrf_sig: [u8; 24] = c.rng.random();
        let b64 = base64::engine::general_purpose::STANDARD;
        let ticket = format!("PVE:{username}:{stamp}::{}", b64.encode(sig));
        let csrf = format!("{stamp}:{}", b64.encode(csrf_sig));
        c.tickets.insert(
            ticket.clone(),
            Ticket { userid: username.clone(), csrf: csrf.clone(), expires: now + TICKET_LIFETIME },
        );
        Ok(Reply::data(json!({
            "username": username,
            "ticket": ticket,
            "CSRFPreventionToken": csrf,
            "clustername": c.name,
            "cap": {
                "vms": {"VM.Allocate": 1, "VM.Clone": 1, "VM.Config.Disk": 1, "VM.PowerMgmt": 1, "VM.Audit": 1},
                "storage": {"Datastore.AllocateSpace": 1, "Datastore.Audit": 1},
                "nodes": {"Sys.Audit": 1},
            },
        })))
    })
}
