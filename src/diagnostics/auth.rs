//! Authentication and authorization of diagnostics requests, delegated to the Kubernetes API
//! server as controller-runtime's `filters.WithAuthenticationAndAuthorization` (what capmox
//! serves its metrics with) does:
//!
//! 1. the `Authorization: Bearer <token>` header is checked with a `TokenReview`
//!    (no or an unknown token: `401 Unauthorized`; the review itself failing: `500`);
//! 2. the user is checked with a `SubjectAccessReview` for the request's lower-cased method on
//!    its non-resource URL path (`get` on `/metrics`; denied: `403 Authorization denied for user
//!    <name>`; the review failing: `500`).
//!
//! Answers are cached like controller-runtime's: token reviews for a minute, allowed decisions
//! for five minutes, denied ones for 30 s. Tokens are cached by their SHA-256 only and never
//! logged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::cache::TtlCache;

/// Cache lifetimes, time limits and sizes of the reviews (controller-runtime's values by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewSettings {
    /// How long a TokenReview answer (authenticated or not) is reused.
    pub token_ttl: Duration,
    /// How long an allowing SubjectAccessReview answer is reused.
    pub allow_ttl: Duration,
    /// How long a denying SubjectAccessReview answer is reused.
    pub deny_ttl: Duration,
    /// Time limit of one review call.
    pub timeout: Duration,
    /// Most cached answers of each kind.
    pub cache_capacity: usize,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        Self {
            token_ttl: Duration::from_secs(60),
            allow_ttl: Duration::from_secs(300),
            deny_ttl: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            cache_capacity: 4096,
        }
    }
}

/// An authenticated user, as the TokenReview reported it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// User name, e.g. `system:serviceaccount:monitoring:prometheus-k8s`.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A review call that failed (the API server could not be asked or did not answer in time).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API call failed.
    #[error("{review}: {source}")]
    Api {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// Client error.
        #[source]
        source: kube::Error,
    },
    /// The API call did not finish in time.
    #[error("{review}: no answer within {timeout:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// The time limit.
        timeout: Duration,
    },
}

type TokenKey = [u8; 32];
type DecisionKey = (User, String, String);

/// Reviews requests with the API server and caches the answers.
pub struct DelegatingAuth {
    client: kube::Client,
    settings: ReviewSettings,
    tokens: TtlCache<TokenKey, Option<User>>,
    decisions: TtlCache<DecisionKey, bool>,
    reviews: AtomicU64,
}

impl std::fmt::Debug for DelegatingAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatingAuth")
            .field("settings", &self.settings)
            .field("cached_tokens", &self.tokens.len())
            .field("cached_decisions", &self.decisions.len())
            .finish_non_exhaustive()
    }
}

fn token_key(token: &str) -> TokenKey {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut k = [0u8; 32];
    k.copy_from_slice(d.as_ref());
    k
}

impl DelegatingAuth {
    /// Reviews with `client` (which needs `create` on `tokenreviews` and `subjectaccessreviews`).
    pub fn new(client: kube::Client, settings: ReviewSettings) -> Self {
        let cap = settings.cache_capacity;
        Self {
            client,
            settings,
            tokens: TtlCache::new(cap),
            decisions: TtlCache::new(cap),
            reviews: AtomicU64::new(0),
        }
    }

    /// Number of review calls sent to the API server so far (cache misses).
    pub fn reviews_sent(&self) -> u64 {
        self.reviews.load(Ordering::Relaxed)
    }

    async fn bounded<T>(
        &self,
        review: &'static str,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ReviewError> {
        self.reviews.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(self.settings.timeout, call).await {
            Ok(r) => r.map_err(|source| ReviewError::Api { review, source }),
            Err(_) => Err(ReviewError::Timeout {
                review,
                timeout: self.settings.timeout,
            }),
        }
    }

    /// The user a bearer token belongs to (`None`: not authenticated).
    pub async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let key = token_key(token);
        if let Some(cached) = self.tokens.get(&key, Instant::now()) {
            return Ok(cached);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = self
            .bounded("TokenReview", api.create(&PostParams::default(), &review))
            .await?;
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Some(User {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            }),
            _ => {
                if let Some(e) = status.error.filter(|e| !e.is_empty()) {
                    tracing::debug!(error = %e, "diagnostics: token not authenticated");
                }
                None
            }
        };
        self.tokens
            .insert(key, user.clone(), self.settings.token_ttl, Instant::now());
        Ok(user)
    }

    /// Whether `user` may `verb` the non-resource URL `path` (and the reviewer's reason).
    pub async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<bool, ReviewError> {
        let key = (user.clone(), verb.to_owned(), path.to_owned());
        if let Some(allowed) = self.decisions.get(&key, Instant::now()) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = self
            .bounded("SubjectAccessReview", api.create(&PostParams::default(), &review))
            .await?;
        let status = answer.status.unwrap_or_default();
        let allowed = status.allowed && status.denied != Some(true);
        if !allowed {
            tracing::debug!(user = %user.name, verb, path, reason = status.reason.as_deref().unwrap_or(""), "diagnostics: access denied");
        }
        let ttl = if allowed {
            self.settings.allow_ttl
        } else {
            self.settings.deny_ttl
        };
        self.decisions.insert(key, allowed, ttl, Instant::now());
        Ok(allowed)
    }
}

/// The bearer token of a request, parsed like Kubernetes' bearer-token authenticator
/// (`Bearer` in any case, then a non-empty token).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A plain-text answer the way Go's `http.Error` writes it.
pub fn text(status: StatusCode, message: &str) -> Response {
    let mut r = (status, format!("{message}\n")).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// axum middleware: lets the request through only for an authenticated and authorized caller.
pub async fn guard(State(auth): State<Arc<DelegatingAuth>>, req: Request, next: Next) -> Response {
    let Some(token) = bearer_token(req.headers()) else {
        return text(StatusCode::UNAUTHORIZED, "Unauthorized");
    };
    let user = match auth.authenticate(token).await {
        Ok(Some(user)) => user,
        Ok(None) => return text(StatusCode::UNAUTHORIZED, "Unauthorized"),
        Err(e) => {
            tracing::error!(error = %e, "diagnostics: authentication failed");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "Authentication failed");
        }
    };
    let verb = req.method().as_str().to_ascii_lowercase();
    let path = req.uri().path().to_owned();
    match auth.authorize(&user, &verb, &path).await {
        Ok(true) => next.run(req).await,
        Ok(false) => text(
            StatusCode::FORBIDDEN,
            &format!("Authorization denied for user {}", user.name),
        ),
        Err(e) => {
            let msg = format!("Authorization for user {} failed", user.name);
            tracing::error!(error = %e, "diagnostics: {msg}");
            text(StatusCode::INTERNAL_SERVER_ERROR, &msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn bearer_tokens_parse_like_kubernetes() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("BEARER abc extra")), Some("abc"));
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwdw==")), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn token_keys_are_digests() {
        assert_eq!(token_key("a"), token_key("a"));
        assert_ne!(token_key("a"), token_key("b"));
        assert!(!format!("{:?}", token_key("secret-token")).contains("secret-token"));
    }
}
