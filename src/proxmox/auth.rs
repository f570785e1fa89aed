//! Credentials and ticket handling.
//!
//! API tokens are stateless: every request carries `Authorization: PVEAPIToken=<id>=<secret>`.
//! Username/password logins obtain a ticket from `POST /access/ticket`, send it as the
//! `PVEAuthCookie` cookie and add the `CSRFPreventionToken` header on every non-GET request.
//! Tickets live 2 h; the client renews them after [`TICKET_RENEW_AFTER`] or once on a 401.

use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::error::Error;
use super::secret::Secret;

/// PVE's ticket lifetime.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 3600);
/// Age after which the client renews a ticket before using it.
pub const TICKET_RENEW_AFTER: Duration = Duration::from_secs(105 * 60);

/// How the client authenticates.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// An API token: `token_id` is `user@realm!tokenname`.
    Token {
        /// Token id, e.g. `capmox@pve!capi`.
        token_id: String,
        /// Token secret (a UUID).
        secret: Secret,
    },
    /// Username (with `@realm`) and password; the client logs in and keeps a ticket.
    Password {
        /// User name, e.g. `root@pam`.
        username: String,
        /// Password.
        password: Secret,
    },
}

impl Credentials {
    /// API token credentials.
    pub fn token(token_id: impl Into<String>, secret: impl Into<Secret>) -> Self {
        Self::Token {
            token_id: token_id.into(),
            secret: secret.into(),
        }
    }

    /// Username/password credentials.
    pub fn password(username: impl Into<String>, password: impl Into<Secret>) -> Self {
        Self::Password {
            username: username.into(),
            password: password.into(),
        }
    }

    /// Checks the token id or user name syntax.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            Self::Token { token_id, secret } => {
                let ok = token_id
                    .split_once('@')
                    .and_then(|(user, rest)| rest.split_once('!').map(|(realm, name)| (user, realm, name)))
                    .is_some_and(|(u, r, n)| !u.is_empty() && !r.is_empty() && !n.is_empty());
                if !ok {
                    return Err(Error::Config(format!(
                        "API token id '{token_id}' is not of the form user@realm!tokenname"
                    )));
                }
                if secret.is_empty() {
                    return Err(Error::Config("API token secret is empty".into()));
                }
                Ok(())
            }
            Self::Password { username, .. } => {
                if username
                    .split_once('@')
                    .is_some_and(|(u, r)| !u.is_empty() && !r.is_empty())
                {
                    Ok(())
                } else {
                    Err(Error::Config(format!(
                        "user name '{username}' must be of the form user@realm"
                    )))
                }
            }
        }
    }
}

/// A ticket obtained from `POST /access/ticket`.
#[derive(Debug, Clone)]
pub struct Ticket {
    /// The `PVEAuthCookie` value.
    pub ticket: Secret,
    /// The `CSRFPreventionToken` value.
    pub csrf: Secret,
    /// The user name PVE reports.
    pub username: String,
    /// When the ticket was obtained.
    pub obtained: Instant,
}

impl Ticket {
    /// Whether the ticket should be renewed before use (older than `renew_after`).
    pub fn needs_renewal(&self, now: Instant, renew_after: Duration) -> bool {
        now.saturating_duration_since(self.obtained) >= renew_after
    }

    /// Whether PVE still accepts the ticket (so it can be used to renew itself).
    pub fn is_valid(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.obtained) < TICKET_LIFETIME
    }
}

/// The `data` of a `POST /access/ticket` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct TicketResponse {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// Ticket.
    pub ticket: String,
    /// CSRF token.
    #[serde(rename = "CSRFPreventionToken", default)]
    pub csrf_prevention_token: Option<String>,
    /// Cluster name (only when clustered and the user has Sys.Audit).
    #[serde(default)]
    pub clustername: Option<String>,
}

fn sensitive(value: &str) -> Result<HeaderValue, Error> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| Error::Config("credential contains characters not allowed in an HTTP header".into()))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The `Authorization` header for a token.
pub fn token_header(token_id: &str, secret: &Secret) -> Result<(HeaderName, HeaderValue), Error> {
    Ok((
        http::header::AUTHORIZATION,
        sensitive(&format!("PVEAPIToken={token_id}={}", secret.expose()))?,
    ))
}

/// The cookie (and, for non-GET methods, CSRF) headers for a ticket.
pub fn ticket_headers(
    ticket: &Ticket,
    method: &http::Method,
) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
    let mut h = vec![(
        http::header::COOKIE,
        sensitive(&format!("PVEAuthCookie={}", ticket.ticket.expose()))?,
    )];
    if method != http::Method::GET && method != http::Method::HEAD {
        h.push((
            HeaderName::from_static("csrfpreventiontoken"),
            sensitive(ticket.csrf.expose())?,
        ));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_header_format_and_redaction() {
        let (name, value) = token_header("capmox@pve!capi", &Secret::new("s3cr3t")).unwrap();
        assert_eq!(name, http::header::AUTHORIZATION);
        assert_eq!(value.to_str().unwrap(), "PVEAPIToken=capmox@pve!capi=s3cr3t");
        assert!(value.is_sensitive());
        assert!(!format!("{value:?}").contains("s3cr3t"));
    }

    #[test]
    fn ticket_headers_csrf_only_on_writes() {
        let t = Ticket {
            ticket: Secret::new("PVE:root@pam:AAAA::sig=="),
            csrf: Secret::new("AAAA:csrf"),
            username: "root@pam".into(),
            obtained: Instant::now(),
        };
        let get = ticket_headers(&t, &http::Method::GET).unwrap();
        assert_eq!(get.len(), 1);
        assert_eq!(
            get[0].1.to_str().unwrap(),
            "PVEAuthCookie=PVE:root@pam:AAAA::sig=="
        );
        let post = ticket_headers(&t, &http::Method::POST).unwrap();
        assert_eq!(post.len(), 2);
        assert_eq!(post[1].0.as_str(), "csrfpreventiontoken");
        assert_eq!(post[1].1.to_str().unwrap(), "AAAA:csrf");
        assert!(!format!("{t:?}").contains("csrf\""));
        assert!(!format!("{t:?}").contains("sig=="));
    }

    #[test]
    fn renewal_timing() {
        let now = Instant::now();
        let t = Ticket {
            ticket: Secret::new("x"),
            csrf: Secret::new("y"),
            username: "u@pam".into(),
            obtained: now,
        };
        assert!(!t.needs_renewal(now, TICKET_RENEW_AFTER));
        assert!(t.needs_renewal(now + TICKET_RENEW_AFTER, TICKET_RENEW_AFTER));
        assert!(t.is_valid(now + TICKET_RENEW_AFTER));
        assert!(!t.is_valid(now + TICKET_LIFETIME));
    }

    #[test]
    fn credentials_validation_and_debug() {
        assert!(Credentials::token("capmox@pve!capi", "x").validate().is_ok());
        assert!(Credentials::token("capmox@pve", "x").validate().is_err());
        assert!(Credentials::token("capmox@pve!capi", "").validate().is_err());
        assert!(Credentials::password("root@pam", "pw").validate().is_ok());
        assert!(Credentials::password("root", "pw").validate().is_err());
        let dbg = format!("{:?}", Credentials::token("capmox@pve!capi", "topsecret"));
        assert!(dbg.contains("capmox@pve!capi") && !dbg.contains("topsecret"));
        let dbg = format!("{:?}", Credentials::password("root@pam", "hunter2"));
        assert!(!dbg.contains("hunter2"));
    }
}
