//! What goes over the wire: reason phrases, empty 401 bodies, 501 text, body on GET.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::raw_http;

fn request(method: &str, path: &str, auth: &str, body: Option<&str>) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if !auth.is_empty() {
        r.push_str(&format!("Authorization: {auth}\r\n"));
    }
    if let Some(b) = body {
        r.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ));
    } else {
        r.push_str("\r\n");
    }
    r
}

#[tokio::test]
async fn reason_phrases_are_sent_on_the_wire() {
    let sim = common::start(common::plain_http()).await;
    let addr = sim.server.addr();
    let auth = sim.auth.clone();

    let resp = raw_http(
        addr,
        &request(
            "GET",
            "/api2/json/nodes/pve1/qemu/999/status/current",
            &auth,
            None,
        ),
    )
    .await;
    let first = resp.lines().next().unwrap();
    assert_eq!(
        first,
        "HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    );
    assert!(
        resp.contains(
            "\"message\":\"Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\\n\""
        )
    );
    assert!(resp.to_ascii_lowercase().contains("server: pve-api-daemon/3.0"));

    let resp = raw_http(
        addr,
        &request("GET", "/api2/json/cluster/nextid?vmid=100", &auth, None),
    )
    .await;
    assert_eq!(
        resp.lines().next().unwrap(),
        "HTTP/1.1 400 Parameter verification failed."
    );

    let resp = raw_http(addr, &request("GET", "/api2/json/nodes/pve1/foo", &auth, None)).await;
    assert_eq!(
        resp.lines().next().unwrap(),
        "HTTP/1.1 501 Method 'GET /nodes/pve1/foo' not implemented"
    );

    let resp = raw_http(
        addr,
        &request(
            "GET",
            "/api2/json/version",
            "PVEAPIToken=capmox@pve!capi=nope",
            None,
        ),
    )
    .await;
    assert_eq!(
        resp.lines().next().unwrap(),
        "HTTP/1.1 401 Authentication failed!"
    );
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    assert!(body.is_empty(), "401 body must be empty: {body:?}");
    let resp = raw_http(addr, &request("GET", "/api2/json/version", "", None)).await;
    assert_eq!(resp.lines().next().unwrap(), "HTTP/1.1 401 No ticket");

    let resp = raw_http(
        addr,
        &request(
            "DELETE",
            "/api2/json/nodes/pve1/qemu/100",
            &auth,
            Some("{\"purge\":1}"),
        ),
    )
    .await;
    assert_eq!(
        resp.lines().next().unwrap(),
        "HTTP/1.1 501 Unexpected content for method 'DELETE'"
    );

    let resp = raw_http(addr, &request("GET", "/api2/json/version", &auth, None)).await;
    assert_eq!(resp.lines().next().unwrap(), "HTTP/1.1 200 OK");
    assert!(
        resp.to_ascii_lowercase()
            .contains("content-type: application/json;charset=utf-8")
    );
}

#[tokio::test]
async fn form_encoded_bodies_and_repeated_keys() {
    let sim = common::start(common::plain_http()).await;
    sim.clone_vm(200, "form").await;
    sim.server.state().set_power(200, pve_sim::PowerState::Running);
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/qemu/200/agent/exec", sim.base))
        .header("Authorization", &sim.auth)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("command=cloud-init&command=status")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(v["data"]["pid"].as_i64().is_some());
    // Booleans as form strings: "1" ok, "true" rejected.
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/qemu/100/clone", sim.base))
        .header("Authorization", &sim.auth)
        .body("newid=201&full=true")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["errors"]["full"], "type check ('boolean') failed - got 'true'");
}
