//! Request routing: authentication, path parsing and dispatch.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Method, Request, Response};

use super::crds::ResourceDef;
use super::fieldval::{self, Decoding, Warnings};
use super::status::{ApiError, ApiResult, qualified};
use super::{
    Body, State, aggregated, authn, crud, delete, discovery, error_response, fieldmgr, openapi, patch,
    protobuf, watch,
};

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
    /// HTTP method.
    pub method: Method,
    /// Media type of the body (without parameters).
    pub content_type: String,
    /// The client's `User-Agent` (default field manager).
    pub user_agent: String,
    /// Warnings for the response's `Warning` headers.
    pub warnings: Arc<Warnings>,
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

    /// Whether `dryRun=All` was requested.
    pub fn dry_run(&self) -> bool {
        self.q("dryRun") == Some("All")
    }

    /// How this write decodes its body (`fieldValidation`; 422 for an unsupported value).
    pub fn decoding(&self) -> ApiResult<Decoding<'_>> {
        let options = match self.method {
            Method::POST => "CreateOptions",
            Method::PUT => "UpdateOptions",
            _ => "PatchOptions",
        };
        Ok(Decoding {
            mode: fieldval::mode(self.q("fieldValidation"), options)?,
            patch: self.method == Method::PATCH,
            apply: self.content_type == "application/apply-patch+yaml",
            warnings: &self.warnings,
        })
    }

    /// The field manager of a non-apply write.
    pub fn manager(&self) -> String {
        fieldmgr::default_manager(self.q("fieldManager"), &self.user_agent)
    }
}

/// Handles one HTTP request.
pub async fn handle(st: Arc<State>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    st.requests.record(&req);
    let warnings = Arc::new(Warnings::default());
    let mut resp = match route(st, req, warnings.clone()).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    for w in warnings.headers() {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&w) {
            resp.headers_mut().append(hyper::header::WARNING, v);
        }
    }
    resp
}

fn authorized<B>(st: &State, req: &Request<B>) -> bool {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == st.token)
}

/// What a path the server does not serve answers: a `Status` under the core and built-in groups,
/// a plain-text `404 page not found` under any other group (CRD groups included), as
/// kube-apiserver's handler chain does.
fn missing(st: &State, group: &str, status: ApiError) -> ApiResult<Response<Body>> {
    let builtin = group.is_empty() || st.registry().all().iter().any(|d| !d.custom && d.group == group);
    if builtin || status.code != 404 {
        Err(status)
    } else {
        Ok(discovery::page_not_found())
    }
}

async fn route(
    st: Arc<State>,
    req: Request<hyper::body::Incoming>,
    warnings: Arc<Warnings>,
) -> ApiResult<Response<Body>> {
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
    if authn::handles(&seg) {
        let method = req.method().clone();
        let body = req
            .into_body()
            .collect()
            .await
            .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?
            .to_bytes();
        return authn::handle(&st, &method, &seg, &body);
    }
    let header = |h: hyper::header::HeaderName| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let accept = header(hyper::header::ACCEPT).replace(' ', "");
    let user_agent = header(hyper::header::USER_AGENT);
    let aggregated = aggregated::requested(&accept);
    let (group, version, rest) = match seg.as_slice() {
        ["version"] => return Ok(discovery::version()),
        ["openapi", "v3"] => return Ok(openapi::index(&st)),
        ["openapi", "v3", "api", v] => return openapi::document(&st, "", v),
        ["openapi", "v3", "apis", g, v] => return openapi::document(&st, g, v),
        ["openapi", ..] => return Err(ApiError::no_route()),
        ["api"] => {
            return Ok(match aggregated {
                Some(av) => aggregated::core(&st, av),
                None => discovery::core_versions(&st),
            });
        }
        ["apis"] => {
            return Ok(match aggregated {
                Some(av) => aggregated::groups(&st, av),
                None => discovery::groups(&st),
            });
        }
        ["api", _] | ["apis", _] | ["apis", _, _] if aggregated::only_aggregated(&accept) => {
            return Err(aggregated::not_acceptable());
        }
        ["api", v] => return discovery::resources(&st, "", v),
        ["apis", g] => return discovery::group(&st, g).or_else(|e| missing(&st, g, e)),
        ["apis", g, v] => return discovery::resources(&st, g, v).or_else(|e| missing(&st, g, e)),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    // (namespace, plural, name, subresource, anything after the subresource)
    let (ns, plural, name, sub, extra) = match rest {
        ["namespaces", n, s] if group.is_empty() && (*s == "status" || *s == "finalize") => {
            (None, "namespaces", Some(*n), Some(*s), false)
        }
        ["namespaces", ns, plural, tail @ ..] => match tail {
            [] => (Some(*ns), *plural, None, None, false),
            [n] => (Some(*ns), *plural, Some(*n), None, false),
            [n, s, more @ ..] => (Some(*ns), *plural, Some(*n), Some(*s), !more.is_empty()),
        },
        [plural] => (None, *plural, None, None, false),
        [plural, n] => (None, *plural, Some(*n), None, false),
        [plural, n, s, more @ ..] => (None, *plural, Some(*n), Some(*s), !more.is_empty()),
        _ => return missing(&st, group, ApiError::no_route()),
    };
    let Some(def) = st.registry().lookup(group, version, plural) else {
        return missing(&st, group, ApiError::no_route());
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
    let body: Bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?
        .to_bytes();
    if def.namespaced != ns.is_some() && !(def.namespaced && name.is_none() && method == Method::GET) {
        return missing(&st, group, ApiError::no_route());
    }
    if let Some(s) = sub {
        let ok = !extra
            && ((s == "status" && def.has_status(version))
                || (s == "finalize" && def.plural == "namespaces"));
        if !ok {
            // Custom resources answer an unknown subresource as a missing object.
            return Err(if def.custom {
                ApiError::not_found(&def.plural, &def.group, name.unwrap_or_default())
            } else {
                ApiError::no_route()
            });
        }
        if def.custom && method == Method::DELETE {
            return Err(ApiError::method_not_allowed_msg(&format!(
                "delete is not supported on resources of kind {:?}",
                qualified(&def.plural, &def.group)
            )));
        }
    }
    if ctype.contains("cbor") {
        return Err(ApiError::unsupported_media(&ctype));
    }
    let protobuf = ctype.contains("protobuf");
    let body = if protobuf && !body.is_empty() {
        if method != Method::POST && method != Method::PUT {
            return Err(ApiError::unsupported_media(&ctype));
        }
        let v = protobuf::decode(&body).map_err(|_| ApiError::unsupported_media(&ctype))?;
        Bytes::from(serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?)
    } else {
        body
    };
    let rr = ResourceReq {
        def,
        version: version.to_string(),
        ns: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
        query,
        wants_table: accept.contains("as=Table"),
        wants_meta: accept.starts_with("application/json;as=PartialObjectMetadata"),
        method: method.clone(),
        content_type: ctype.clone(),
        user_agent,
        warnings,
    };
    match (method, rr.name.is_some()) {
        (Method::GET, false) if rr.flag("watch") => watch::watch(st, rr).await,
        (Method::GET, false) => crud::list(&st, &rr).await,
        (Method::GET, true) => crud::get(&st, &rr).await,
        (Method::POST, false) => crud::create(&st, &rr, &body).await,
        // The apiserver creates custom resources POSTed to a named path from the body.
        (Method::POST, true) if rr.def.custom => crud::create(&st, &rr, &body).await,
        (Method::PUT, true) => crud::update(&st, &rr, &body).await,
        (Method::PATCH, true) => patch::patch(&st, &rr, &ctype, &body).await,
        (Method::PUT | Method::PATCH, false) if rr.def.custom => {
            Err(ApiError::bad_request("name must be provided"))
        }
        (Method::DELETE, true) => delete::delete(&st, &rr, &body).await,
        (Method::DELETE, false) => delete::delete_collection(&st, &rr, &body).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}
