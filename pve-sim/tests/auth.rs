//! Ticket authentication with CSRF tokens, and token handling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};

async fn login(sim: &common::Sim, user: &str, password: &str) -> reqwest::Response {
    sim.client
        .post(format!("{}/access/ticket", sim.base))
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn ticket_login_and_csrf_on_writes() {
    let sim = common::start_default().await;
    let bad = login(&sim, sim.server.user(), "wrong").await;
    assert_eq!(bad.status().as_u16(), 401);

    let r = login(&sim, sim.server.user(), sim.server.password()).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    let ticket = v["data"]["ticket"].as_str().unwrap().to_string();
    let csrf = v["data"]["CSRFPreventionToken"].as_str().unwrap().to_string();
    assert!(ticket.starts_with("PVE:root@pam:"));
    assert_eq!(v["data"]["username"], "root@pam");
    let cookie = format!("PVEAuthCookie={ticket}");

    // Reads need only the cookie.
    let r = sim
        .client
        .get(format!("{}/cluster/resources", sim.base))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Writes without the CSRF header are refused.
    let url = format!("{}/nodes/pve1/qemu/100/clone", sim.base);
    let r = sim
        .client
        .post(&url)
        .header("Cookie", &cookie)
        .json(&json!({"newid": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.text().await.unwrap().is_empty());
    let r = sim
        .client
        .post(&url)
        .header("Cookie", &cookie)
        .header("CSRFPreventionToken", "bogus")
        .json(&json!({"newid": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // With it, they work; the task records the user.
    let r = sim
        .client
        .post(&url)
        .header("Cookie", &cookie)
        .header("CSRFPreventionToken", &csrf)
        .json(&json!({"newid": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    let upid = v["data"].as_str().unwrap();
    assert!(upid.ends_with(":root@pam:"), "{upid}");

    // Renewal: the ticket as password gives a new ticket.
    let r = login(&sim, "root@pam", &ticket).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_ne!(v["data"]["ticket"].as_str().unwrap(), ticket);

    // A forged ticket is refused.
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .header("Cookie", "PVEAuthCookie=PVE:root@pam:00000000::forged")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test]
async fn token_tasks_carry_the_token_id() {
    let sim = common::start_default().await;
    let r = sim
        .post("/nodes/pve1/qemu/100/clone", json!({"newid": 310}))
        .await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert!(upid.ends_with(":capmox@pve!capi:"), "{upid}");
    sim.wait_task(&upid).await;
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    let st = sim.get(&format!("/nodes/pve1/tasks/{enc}/status")).await.json["data"].clone();
    assert_eq!(st["user"], "capmox@pve");
    assert_eq!(st["tokenid"], "capi");
    // A UPID asked on another node is unknown there.
    let r = sim.get(&format!("/nodes/pve2/tasks/{enc}/status")).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["errors"]["upid"], "no such task");
    let log = sim.get(&format!("/nodes/pve1/tasks/{enc}/log")).await;
    assert_eq!(
        log.json["data"].as_array().unwrap().last().unwrap()["t"],
        "TASK OK"
    );
    assert!(log.json["total"].as_u64().unwrap() >= 1);
    // Space instead of '=' after PVEAPIToken is accepted too.
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .header(
            "Authorization",
            format!(
                "PVEAPIToken {}={}",
                sim.server.token_id(),
                sim.server.token_secret()
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[tokio::test]
async fn a_token_can_be_revoked_and_rotated_at_runtime() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    assert_eq!(sim.get("/version").await.status, 200);
    assert!(st.revoke_token(sim.server.token_id()));
    let r = sim.get("/version").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (401, ""),
        "PVE's answer to an unknown token"
    );
    assert!(!st.revoke_token(sim.server.token_id()), "already gone");
    st.set_token(sim.server.token_id(), "rotated-secret");
    assert_eq!(
        sim.get("/version").await.status,
        401,
        "the old secret stays refused"
    );
    let rotated = sim
        .client
        .get(format!("{}/version", sim.base))
        .header(
            "Authorization",
            format!("PVEAPIToken={}=rotated-secret", sim.server.token_id()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rotated.status(), 200);
    sim.server.shutdown().await;
}
