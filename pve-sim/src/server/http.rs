//! Response building with PVE's headers, reason phrases and error bodies.

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::Full;

use crate::error::{ApiError, ErrorBody};

pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Builds a response with PVE's headers and the given reason phrase.
pub(super) fn respond(
    status: u16,
    reason: Option<&str>,
    body: Bytes,
    content_type: Option<&str>,
) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    headers.insert("server", http::HeaderValue::from_static("pve-api-daemon/3.0"));
    headers.insert("cache-control", http::HeaderValue::from_static("max-age=0"));
    headers.insert("pragma", http::HeaderValue::from_static("no-cache"));
    if let Some(ct) = content_type
        && let Ok(v) = http::HeaderValue::from_str(ct)
    {
        headers.insert("content-type", v);
    }
    if status >= 400 {
        headers.insert("connection", http::HeaderValue::from_static("close"));
    }
    if let Some(reason) = reason
        && !reason.contains(['\r', '\n'])
        && let Ok(phrase) = hyper::ext::ReasonPhrase::try_from(reason.as_bytes().to_vec())
    {
        resp.extensions_mut().insert(phrase);
    }
    resp
}

pub(super) fn error_response(err: &ApiError) -> Response<Full<Bytes>> {
    match err.body {
        ErrorBody::Empty => respond(err.status, Some(err.reason()), Bytes::new(), None),
        ErrorBody::Text => respond(
            err.status,
            Some(err.reason()),
            Bytes::from(err.message.clone()),
            None,
        ),
        ErrorBody::Json => respond(
            err.status,
            Some(err.reason()),
            Bytes::from(err.json_body().to_string()),
            Some("application/json;charset=UTF-8"),
        ),
    }
}
