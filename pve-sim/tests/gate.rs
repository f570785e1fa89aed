//! The request gate for crash-injection tests: `gate_after`, `wait_gate_blocked`, `open_gate`,
//! `discard_blocked`, `blocked_requests`, `request_total`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

const WAIT: Duration = Duration::from_secs(10);

/// Waits until `f` holds, failing after a deadline.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn request_total_counts_every_api_request() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    assert_eq!(st.request_total(), 0);
    assert_eq!(sim.get("/version").await.status, 200);
    assert_eq!(sim.get("/no/such/path").await.status, 501);
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(st.request_total(), 3, "ok, 501 and 401 all count");
    // A path outside /api2/json is not an API request.
    let r = sim
        .client
        .get(format!("{}/index.html", sim.server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 501);
    assert_eq!(st.request_total(), 3);
}

#[tokio::test]
async fn gate_blocks_after_n_requests_until_opened() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    assert!(
        !st.wait_gate_blocked(Duration::from_millis(20)).await,
        "nothing blocked while the gate is open"
    );
    st.gate_after(2);
    assert_eq!(sim.get("/version").await.status, 200);
    assert_eq!(sim.get("/cluster/nextid").await.status, 200);
    assert_eq!(st.request_total(), 2);

    let client = sim.client.clone();
    let url = format!("{}/nodes/pve1/qemu/100/clone", sim.base);
    let auth = sim.auth.clone();
    let blocked = tokio::spawn(async move {
        let r = client
            .post(url)
            .header("Authorization", auth)
            .json(&json!({"newid": 200, "name": "gated"}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    });
    assert!(st.wait_gate_blocked(WAIT).await);
    assert_eq!(st.blocked_requests(), 1);
    assert_eq!(st.request_total(), 2, "a blocked request is not processed");
    assert!(st.vm(200).is_none(), "no state change before the gate opens");
    assert_eq!(st.request_count("POST /nodes/{node}/qemu/{vmid}/clone"), 0);

    st.open_gate();
    let (status, body) = blocked.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(st.request_total(), 3);
    assert_eq!(st.blocked_requests(), 0);
    assert!(st.vm(200).is_some());
    // The gate is disabled after opening.
    assert_eq!(sim.get("/version").await.status, 200);
    assert_eq!(st.request_total(), 4);
}

#[tokio::test]
async fn gate_counts_logins_and_failed_auth() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    st.gate_after(1);
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .header("Authorization", "PVEAPIToken=nobody@pve!x=wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "served: the first request");
    let client = sim.client.clone();
    let url = format!("{}/access/ticket", sim.base);
    let form = [
        ("username", sim.server.user().to_string()),
        ("password", sim.server.password().to_string()),
    ];
    let login = tokio::spawn(async move {
        client
            .post(url)
            .form(&form)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert!(st.wait_gate_blocked(WAIT).await, "the login blocks");
    st.open_gate();
    assert_eq!(login.await.unwrap(), 200);
    assert_eq!(st.request_total(), 2);
}

#[tokio::test]
async fn abandoned_blocked_request_is_never_processed() {
    let sim = common::start(common::plain_http()).await;
    let st = sim.server.state();
    st.gate_after(0);
    let body = r#"{"newid":201,"name":"abandoned"}"#;
    let request = format!(
        "POST /api2/json/nodes/pve1/qemu/100/clone HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        sim.auth,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(sim.server.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    assert!(st.wait_gate_blocked(WAIT).await);
    drop(stream); // the client dies
    eventually("the abandoned request leaves the gate", || {
        st.blocked_requests() == 0
    })
    .await;
    st.open_gate();
    assert_eq!(sim.get("/version").await.status, 200);
    assert_eq!(st.request_total(), 1, "only the /version call was processed");
    assert!(st.vm(201).is_none());
    assert_eq!(st.request_count("POST /nodes/{node}/qemu/{vmid}/clone"), 0);
}

#[tokio::test]
async fn discard_blocked_closes_the_connection_and_keeps_the_gate_closed() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    st.gate_after(0);
    let client = sim.client.clone();
    let url = format!("{}/nodes/pve1/qemu/100/clone", sim.base);
    let auth = sim.auth.clone();
    let first = tokio::spawn(async move {
        client
            .post(url)
            .header("Authorization", auth)
            .json(&json!({"newid": 202, "name": "discarded"}))
            .send()
            .await
    });
    assert!(st.wait_gate_blocked(WAIT).await);
    st.discard_blocked();
    let result = first.await.unwrap();
    assert!(
        result.is_err(),
        "the client sees the connection close: {result:?}"
    );
    assert_eq!(st.blocked_requests(), 0);
    assert_eq!(st.request_total(), 0);
    assert!(st.vm(202).is_none());

    // Still closed: the next request blocks until the gate opens.
    let client = sim.client.clone();
    let url = format!("{}/version", sim.base);
    let auth = sim.auth.clone();
    let second = tokio::spawn(async move {
        client
            .get(url)
            .header("Authorization", auth)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert!(st.wait_gate_blocked(WAIT).await);
    st.open_gate();
    assert_eq!(second.await.unwrap(), 200);
    assert_eq!(st.request_total(), 1);
}

#[tokio::test]
async fn stepping_through_a_sequence_one_call_at_a_time() {
    // The crash-injection pattern: let k calls through, observe the block, open, repeat.
    let sim = common::start_default().await;
    let st = sim.server.state();
    for k in 0..3u64 {
        let before = st.request_total();
        st.gate_after(k);
        let client = sim.client.clone();
        let base = sim.base.clone();
        let auth = sim.auth.clone();
        let calls = tokio::spawn(async move {
            for _ in 0..4 {
                let r = client
                    .get(format!("{base}/version"))
                    .header("Authorization", &auth)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200);
            }
        });
        assert!(st.wait_gate_blocked(WAIT).await);
        assert_eq!(st.request_total(), before + k, "exactly k calls were served");
        st.open_gate();
        calls.await.unwrap();
    }
    assert_eq!(st.request_total(), 12);
}

#[tokio::test]
async fn aborted_reqwest_client_request_is_dropped_at_the_gate() {
    // What a killed controller looks like: its task (owning its own client) is aborted mid-call.
    let sim = common::start_default().await;
    let st = sim.server.state();
    st.gate_after(0);
    let pem = sim.server.ca_pem().unwrap();
    let url = format!("{}/nodes/pve1/qemu/100/clone", sim.base);
    let auth = sim.auth.clone();
    let controller = tokio::spawn(async move {
        let cert = reqwest::Certificate::from_pem(pem.as_bytes()).unwrap();
        let client = reqwest::Client::builder().tls_certs_only([cert]).build().unwrap();
        client
            .post(url)
            .header("Authorization", auth)
            .json(&json!({"newid": 203, "name": "killed"}))
            .send()
            .await
    });
    assert!(st.wait_gate_blocked(WAIT).await);
    controller.abort();
    assert!(controller.await.is_err());
    eventually("the killed client's request leaves the gate", || {
        st.blocked_requests() == 0
    })
    .await;
    st.open_gate();
    assert_eq!(st.request_total(), 0);
    assert!(st.vm(203).is_none());
}

#[tokio::test]
async fn shutdown_discards_blocked_requests() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    st.gate_after(0);
    let client = sim.client.clone();
    let url = format!("{}/version", sim.base);
    let auth = sim.auth.clone();
    let blocked = tokio::spawn(async move { client.get(url).header("Authorization", auth).send().await });
    assert!(st.wait_gate_blocked(WAIT).await);
    sim.server.shutdown().await;
    let result = blocked.await.unwrap();
    assert!(result.is_err(), "no response after shutdown: {result:?}");
    assert_eq!(st.request_total(), 0);
}
