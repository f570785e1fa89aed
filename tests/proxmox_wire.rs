//! Wire-level behaviour of the client against a tiny in-process HTTP stub: reason phrases,
//! ticket login/renewal and CSRF, query vs JSON body, multipart field order, secrets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use capmox::proxmox::{ApiPath, Client, ClientConfig, Credentials, DeleteVmOptions, Error, ErrorClass};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

#[derive(Debug, Clone, Default)]
struct Seen {
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    cookie: Option<String>,
    csrf: Option<String>,
    content_type: Option<String>,
    body: Bytes,
}

#[derive(Default)]
struct StubState {
    seen: Vec<Seen>,
    logins: Vec<serde_json::Value>,
    valid_ticket: Option<String>,
    proxy_calls: u32,
}

const UPID: &str = "UPID:pve1:00001234:00005678:6740A1B2:qmdestroy:100:root@pam:";

fn reply(status: u16, reason: Option<&'static str>, body: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_owned())));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    if let Some(r) = reason {
        resp.extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(r.as_bytes()));
    }
    resp
}

async fn handle(state: Arc<Mutex<StubState>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let h = |n: &str| {
        parts
            .headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        authorization: h("authorization"),
        cookie: h("cookie"),
        csrf: h("csrfpreventiontoken"),
        content_type: h("content-type"),
        body: body.clone(),
    };
    let mut st = state.lock().unwrap();
    st.seen.push(seen.clone());
    let path = seen.path.strip_prefix("/api2/json").unwrap_or("");
    if path == "/access/ticket" {
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let n = st.logins.len() + 1;
        st.logins.push(v.clone());
        if v["password"] == "good-password"
            || Some(v["password"].as_str().unwrap_or("")) == st.valid_ticket.as_deref()
        {
            let ticket = format!("PVE:root@pam:{n:08X}::sig+/=");
            st.valid_ticket = Some(ticket.clone());
            let body = serde_json::json!({"data": {"username": "root@pam", "ticket": ticket, "CSRFPreventionToken": format!("CSRF{n}")}});
            return reply(200, None, &body.to_string());
        }
        return reply(
            401,
            Some("authentication failure"),
            r#"{"data":null,"message":"authentication failure\n"}"#,
        );
    }
    // Auth: token or current ticket (+ CSRF on writes).
    let token_ok = seen.authorization.as_deref() == Some("PVEAPIToken=capmox@pve!capi=token-secret");
    let ticket_ok = match (&st.valid_ticket, &seen.cookie) {
        (Some(t), Some(c)) => c == &format!("PVEAuthCookie={t}"),
        _ => false,
    };
    if !token_ok && !ticket_ok {
        return reply(401, Some("No ticket"), "");
    }
    if ticket_ok && seen.method != "GET" {
        let expected = format!("CSRF{}", st.logins.len());
        if seen.csrf.as_deref() != Some(expected.as_str()) {
            return reply(401, Some("Permission denied - invalid csrf token"), "");
        }
    }
    match (seen.method.as_str(), path) {
        ("GET", "/version") => reply(
            200,
            None,
            r#"{"data":{"version":"8.4.1","release":"8.4","repoid":"abc"}}"#,
        ),
        ("GET", "/reason") => reply(
            500,
            Some("VM 100 not running"),
            r#"{"data":null,"message":"something else\n"}"#,
        ),
        ("GET", "/bodyonly") => reply(500, None, r#"{"data":null,"message":"VM is locked (backup)\n"}"#),
        ("GET", "/proxy") => {
            st.proxy_calls += 1;
            if st.proxy_calls == 1 {
                reply(
                    595,
                    Some("Errors during connection establishment, proxy handshake: No route to host"),
                    "",
                )
            } else {
                reply(200, None, r#"{"data":"ok"}"#)
            }
        }
        ("POST", "/proxy") => reply(
            595,
            Some("Errors during connection establishment, proxy handshake: No route to host"),
            "",
        ),
        ("GET", "/garbage") => reply(200, None, "{not json"),
        ("GET", "/cluster/nextid") => reply(200, None, r#"{"data":"105"}"#),
        ("DELETE", "/nodes/pve1/qemu/100") => reply(200, None, &format!(r#"{{"data":"{UPID}"}}"#)),
        ("POST", "/nodes/pve1/storage/local/upload") => reply(200, None, &format!(r#"{{"data":"{UPID}"}}"#)),
        ("POST", "/expire") => {
            st.valid_ticket = None;
            reply(200, None, r#"{"data":null}"#)
        }
        _ => reply(501, Some("Method not implemented"), "Method not implemented"),
    }
}

async fn start_stub() -> (String, Arc<Mutex<StubState>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Mutex::new(StubState::default()));
    let st = state.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                break;
            };
            let st = st.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let st = st.clone();
                    async move { Ok::<_, Infallible>(handle(st, req).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), state)
}

fn token_client(url: &str) -> Client {
    Client::new(ClientConfig::new(
        url,
        Credentials::token("capmox@pve!capi", "token-secret"),
    ))
    .unwrap()
}

#[tokio::test]
async fn reason_phrase_wins_over_body_message() {
    let (url, _state) = start_stub().await;
    let client = token_client(&url);
    let err = client
        .request_json(http::Method::GET, &ApiPath::root().lit("reason"), &[], None)
        .await
        .unwrap_err();
    assert_eq!(err.message(), "VM 100 not running");
    assert_eq!(err.class(), ErrorClass::WrongState);
    let err = client
        .request_json(http::Method::GET, &ApiPath::root().lit("bodyonly"), &[], None)
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Locked);
    assert_eq!(err.message(), "VM is locked (backup)");
    let err = client
        .request_json(http::Method::GET, &ApiPath::root().lit("garbage"), &[], None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Decode { ref context, .. } if context == "/garbage"),
        "{err:?}"
    );
    assert_eq!(client.next_id().await.unwrap(), 105);
}

#[tokio::test]
async fn token_header_and_delete_uses_query_without_body() {
    let (url, state) = start_stub().await;
    let client = token_client(&format!("{url}/api2/json/"));
    let opts = DeleteVmOptions {
        purge: Some(true),
        destroy_unreferenced_disks: Some(true),
    };
    let upid = client.delete_vm("pve1", 100, &opts).await.unwrap();
    assert_eq!(upid.task_type, "qmdestroy");
    let seen = state.lock().unwrap().seen.clone();
    let del = seen.iter().find(|s| s.method == "DELETE").unwrap();
    assert_eq!(del.path, "/api2/json/nodes/pve1/qemu/100");
    assert_eq!(del.query, "destroy-unreferenced-disks=1&purge=1");
    assert!(del.body.is_empty());
    assert_eq!(
        del.authorization.as_deref(),
        Some("PVEAPIToken=capmox@pve!capi=token-secret")
    );
    assert!(del.cookie.is_none() && del.csrf.is_none());
}

#[tokio::test]
async fn multipart_upload_field_order() {
    let (url, state) = start_stub().await;
    let client = token_client(&url);
    client
        .upload_iso(
            "pve1",
            "local",
            "user-data-101.iso",
            Bytes::from_static(b"ISO-BYTES"),
        )
        .await
        .unwrap();
    let seen = state.lock().unwrap().seen.clone();
    let up = seen.iter().find(|s| s.path.ends_with("/upload")).unwrap();
    assert!(
        up.content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("multipart/form-data"))
    );
    let body = String::from_utf8_lossy(&up.body);
    let content_at = body.find("name=\"content\"").expect("content part");
    let file_at = body
        .find("name=\"filename\"; filename=\"user-data-101.iso\"")
        .expect("file part");
    assert!(content_at < file_at, "content must come before the file part");
    assert!(body.contains("\r\n\r\niso\r\n"));
    assert!(body.contains("ISO-BYTES"));
}

#[tokio::test]
async fn ticket_login_csrf_and_renewal_on_401() {
    let (url, state) = start_stub().await;
    let client = Client::new(ClientConfig::new(
        &url,
        Credentials::password("root@pam", "good-password"),
    ))
    .unwrap();
    client.version().await.unwrap();
    // A write carries the CSRF token.
    client
        .request_json(
            http::Method::POST,
            &ApiPath::root().lit("expire"),
            &[],
            Some(serde_json::json!({})),
        )
        .await
        .unwrap();
    // The stub dropped the ticket: the next call gets a 401, logs in again and succeeds.
    client.version().await.unwrap();
    let st = state.lock().unwrap();
    assert_eq!(st.logins.len(), 2, "{:?}", st.logins);
    assert_eq!(st.logins[0]["username"], "root@pam");
    assert_eq!(st.logins[1]["password"], "good-password");
    let post = st.seen.iter().find(|s| s.path.ends_with("/expire")).unwrap();
    assert_eq!(post.csrf.as_deref(), Some("CSRF1"));
    assert!(
        post.cookie
            .as_deref()
            .is_some_and(|c| c.starts_with("PVEAuthCookie=PVE:root@pam:"))
    );
    let gets: Vec<_> = st.seen.iter().filter(|s| s.method == "GET").collect();
    assert!(gets.iter().all(|g| g.csrf.is_none()), "no CSRF header on GET");
    let statuses: Vec<_> = st.seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        statuses,
        vec![
            "/api2/json/access/ticket",
            "/api2/json/version",
            "/api2/json/expire",
            "/api2/json/version",
            "/api2/json/access/ticket",
            "/api2/json/version"
        ]
    );
}

#[tokio::test]
async fn wrong_password_is_auth_error_without_secret_in_output() {
    let (url, _state) = start_stub().await;
    let client = Client::new(ClientConfig::new(
        &url,
        Credentials::password("root@pam", "bad-pass-123"),
    ))
    .unwrap();
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Auth { status: 401, .. }), "{err:?}");
    assert!(!format!("{err} {err:?} {client:?}").contains("bad-pass-123"));
}

#[tokio::test]
async fn bad_token_is_auth_error_with_reason() {
    let (url, _state) = start_stub().await;
    let client = Client::new(ClientConfig::new(
        &url,
        Credentials::token("capmox@pve!capi", "nope"),
    ))
    .unwrap();
    let err = client.version().await.unwrap_err();
    assert!(
        matches!(err, Error::Auth { status: 401, ref message } if message == "No ticket"),
        "{err:?}"
    );
}

#[tokio::test]
async fn proxy_errors_retry_gets_only() {
    let (url, state) = start_stub().await;
    let mut cfg = ClientConfig::new(&url, Credentials::token("capmox@pve!capi", "token-secret"));
    cfg.retry_base = std::time::Duration::from_millis(5);
    let client = Client::new(cfg).unwrap();
    let v = client
        .request_json(http::Method::GET, &ApiPath::root().lit("proxy"), &[], None)
        .await
        .unwrap();
    assert_eq!(v, serde_json::json!("ok"));
    assert_eq!(state.lock().unwrap().proxy_calls, 2);
    let err = client
        .request_json(
            http::Method::POST,
            &ApiPath::root().lit("proxy"),
            &[],
            Some(serde_json::json!({})),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Server { status: 595, .. }), "{err:?}");
    assert!(err.is_retryable());
    let posts = state
        .lock()
        .unwrap()
        .seen
        .iter()
        .filter(|s| s.method == "POST")
        .count();
    assert_eq!(posts, 1, "writes are never retried inside the client");
}

#[tokio::test]
async fn aged_ticket_is_renewed_with_itself() {
    let (url, state) = start_stub().await;
    let mut cfg = ClientConfig::new(&url, Credentials::password("root@pam", "good-password"));
    cfg.ticket_renew_after = std::time::Duration::ZERO;
    let client = Client::new(cfg).unwrap();
    client.version().await.unwrap();
    let first_ticket = state.lock().unwrap().valid_ticket.clone().unwrap();
    client.version().await.unwrap();
    let st = state.lock().unwrap();
    assert_eq!(st.logins.len(), 2);
    assert_eq!(st.logins[0]["password"], "good-password");
    assert_eq!(
        st.logins[1]["password"],
        first_ticket.as_str(),
        "renewal sends the current ticket as password"
    );
    assert_ne!(st.valid_ticket.as_deref(), Some(first_ticket.as_str()));
}
