//! Request routing: authentication, path parsing and dispatch.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Method, Request, Response};

use super::crds::ResourceDef;
use super::status::{ApiError, ApiResult};
use super::{Body, State, crud, delete, discovery, error_response, openapi, patch, protobuf, watch};

/// A parsed resource request.
pub struct ResourceReq {
    /// Kind being addressed.
    pub def: Arc<ResourceDef>,
    /// Requested version.
    pub version: String,
    /// Namespace from the path.
    pub ns: Option<String>,
    /// Object name from the path.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub sub: Option<String>,
    /// Query parameters.
    pub query: HashMap<String, String>,
    /// Whether the client asked for a `meta.k8s.io` Table (`kubectl get`).
    pub wants_table: bool,
    /// Whether the client asked for `PartialObjectMetadata` (kube's `*_metadata` calls).
    pub wants_meta: bool,
}

impl ResourceReq {
    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    /// Whether a boolean query parameter is set.
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }

    /// Whether `fieldValidation=Strict` was requested (unknown fields are an error, not pruned).
    pub fn strict(&self) -> bool {
        self.q("fieldValidation") == Some("Strict")
    }

    /// Whether `dryRun=All` was requested.
    pub fn dry_run(&self) -> bool {
        self.q("dryRun") == Some("All")
    }
}

/// Handles one HTTP request.
pub async fn handle(st: Arc<State>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    st.requests.record(&req);
    match route(st, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

fn authorized<B>(st: &State, req: &Request<B>) -> bool {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == st.token)
}

async fn route(st: Arc<State>, req: Request<hyper::body::Incoming>) -> ApiResult<Response<Body>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    if path == "/healthz" || path == "/readyz" || path == "/livez" {
        return Ok(discovery::text("ok"));
    }
    if !authorized(&st, &req) {
        return Err(ApiError::unauthorized());
    }
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let seg: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest) = match seg.as_slice() {
        ["version"] => return Ok(discovery::version()),
        ["openapi", "v3"] => return Ok(openapi::index(&st)),
        ["openapi", "v3", "api", v] => return openapi::document(&st, "", v),
        ["openapi", "v3", "apis", g, v] => return openapi::document(&st, g, v),
        ["openapi", ..] => return Err(ApiError::no_route()),
        ["api"] => return Ok(discovery::core_versions(&st)),
        ["apis"] => return Ok(discovery::groups(&st)),
        ["api", v] => return discovery::resources(&st, "", v),
        ["apis", g] => return discovery::group(&st, g),
        ["apis", g, v] => return discovery::resources(&st, g, v),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    let (ns, plural, name, sub) = match rest {
        ["namespaces", n, s] if group.is_empty() && (*s == "status" || *s == "finalize") => {
            (None, "namespaces", Some(*n), Some(*s))
        }
        ["namespaces", ns, plural, tail @ ..] => match tail {
            [] => (Some(*ns), *plural, None, None),
            [n] => (Some(*ns), *plural, Some(*n), None),
            [n, s] => (Some(*ns), *plural, Some(*n), Some(*s)),
            _ => return Err(ApiError::no_route()),
        },
        [plural] => (None, *plural, None, None),
        [plural, n] => (None, *plural, Some(*n), None),
        [plural, n, s] => (None, *plural, Some(*n), Some(*s)),
        _ => return Err(ApiError::no_route()),
    };
    let def = st
        .registry()
        .lookup(group, version, plural)
        .ok_or_else(ApiError::no_route)?;
    if def.namespaced != ns.is_some() && !(def.namespaced && name.is_none() && req.method() == Method::GET) {
        return Err(ApiError::no_route());
    }
    if let Some(s) = sub {
        let ok =
            (s == "status" && def.has_status(version)) || (s == "finalize" && def.plural == "namespaces");
        if !ok {
            return Err(ApiError::no_route());
        }
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .replace(' ', "");
    let rr = ResourceReq {
        def,
        version: version.to_string(),
        ns: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
        query,
        wants_table: accept.contains("as=Table"),
        wants_meta: accept.starts_with("application/json;as=PartialObjectMetadata"),
    };
    let method = req.method().clone();
    let ctype = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    if ctype.contains("cbor") {
        return Err(ApiError::unsupported_media(&ctype));
    }
    let protobuf = ctype.contains("protobuf");
    let body: Bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?
        .to_bytes();
    let body = if protobuf && !body.is_empty() {
        if method != Method::POST && method != Method::PUT {
            return Err(ApiError::unsupported_media(&ctype));
        }
        let v = protobuf::decode(&body).map_err(|_| ApiError::unsupported_media(&ctype))?;
        Bytes::from(serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?)
    } else {
        body
    };
    match (method, rr.name.is_some()) {
        (Method::GET, false) if rr.flag("watch") => watch::watch(st, rr).await,
        (Method::GET, false) => crud::list(&st, &rr).await,
        (Method::GET, true) => crud::get(&st, &rr).await,
        (Method::POST, false) => crud::create(&st, &rr, &body).await,
        (Method::PUT, true) => crud::update(&st, &rr, &body).await,
        (Method::PATCH, true) => patch::patch(&st, &rr, &ctype, &body).await,
        (Method::DELETE, true) => delete::delete(&st, &rr, &body).await,
        (Method::DELETE, false) => delete::delete_collection(&st, &rr, &body).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}
