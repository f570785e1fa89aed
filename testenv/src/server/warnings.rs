//! `Warning` response headers: admission webhooks' `warnings` are collected while a request is
//! handled (a task-local list) and sent as `Warning: 299 - "<text>"` headers, deduplicated, as
//! kube-apiserver does.

use std::cell::RefCell;
use std::future::Future;

use hyper::Response;
use hyper::header::{HeaderValue, WARNING};

use super::Body;

tokio::task_local! {
    static WARNINGS: RefCell<Vec<String>>;
}

/// Records a warning for the current request (ignored outside a request).
pub fn add(text: &str) {
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        if !w.iter().any(|x| x == text) {
            w.push(text.to_owned());
        }
    });
}

/// Runs `f` collecting the warnings it records.
pub async fn collect<F: Future>(f: F) -> (F::Output, Vec<String>) {
    WARNINGS
        .scope(RefCell::new(Vec::new()), async {
            let out = f.await;
            let warnings = WARNINGS.with(|w| w.take());
            (out, warnings)
        })
        .await
}

/// Adds one `Warning` header per warning.
pub fn attach(resp: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        let quoted = serde_json::to_string(w).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {quoted}")) {
            resp.headers_mut().append(WARNING, v);
        }
    }
}
