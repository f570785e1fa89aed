//! Shared helpers for the simulator's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pve_sim::{SimConfig, SimServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A started simulator plus an HTTPS client trusting its CA and authenticating with the token.
pub struct Sim {
    pub server: SimServer,
    pub client: reqwest::Client,
    pub base: String,
    pub auth: String,
}

/// A response reduced to what the tests look at.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: String,
    pub json: Value,
}

/// Starts a simulator; one whose config and scenario pin no release plays the default (8.4), not
/// the release `PVE_SIM_VERSION` names (these tests judge the simulator itself).
pub async fn start(mut config: SimConfig) -> Sim {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if config.pve_version.is_none() {
        config.pve_version = Some(config.scenario.version);
    }
    let server = SimServer::start(config).await.expect("simulator starts");
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(20));
    if let Some(pem) = server.ca_pem() {
        let cert = reqwest::Certificate::from_pem(pem.as_bytes()).expect("CA PEM");
        builder = builder.tls_certs_only([cert]);
    }
    let client = builder.build().expect("client");
    let base = format!("{}/api2/json", server.url());
    let auth = format!("PVEAPIToken={}={}", server.token_id(), server.token_secret());
    Sim {
        server,
        client,
        base,
        auth,
    }
}

pub async fn start_default() -> Sim {
    start(SimConfig::default()).await
}

async fn reduce(r: reqwest::Response) -> Resp {
    let status = r.status().as_u16();
    let body = r.text().await.expect("body");
    let json = serde_json::from_str(&body).unwrap_or(Value::Null);
    Resp { status, body, json }
}

impl Sim {
    pub async fn get(&self, path: &str) -> Resp {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .send()
            .await;
        reduce(r.expect("GET")).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .json(&body)
            .send()
            .await;
        reduce(r.expect("POST")).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        let r = self
            .client
            .put(format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .json(&body)
            .send()
            .await;
        reduce(r.expect("PUT")).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        let r = self
            .client
            .delete(format!("{}{path}", self.base))
            .header("Authorization", &self.auth)
            .send()
            .await;
        reduce(r.expect("DELETE")).await
    }

    /// Polls a task until it stops; returns its exitstatus.
    pub async fn wait_task(&self, upid: &str) -> String {
        let node = upid.split(':').nth(1).expect("node in UPID").to_string();
        let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let r = self.get(&format!("/nodes/{node}/tasks/{enc}/status")).await;
            assert_eq!(r.status, 200, "task status: {}", r.body);
            if r.json["data"]["status"] == "stopped" {
                return r.json["data"]["exitstatus"]
                    .as_str()
                    .expect("exitstatus")
                    .to_string();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {upid} did not finish"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// POSTs and expects a UPID back; waits for the task and returns its exitstatus.
    pub async fn post_task(&self, path: &str, body: Value) -> String {
        let r = self.post(path, body).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let upid = r.json["data"].as_str().expect("UPID").to_string();
        assert!(upid.starts_with("UPID:") && upid.ends_with(':'), "{upid}");
        self.wait_task(&upid).await
    }

    /// Linked clone of template 100 to `newid`, waited for.
    pub async fn clone_vm(&self, newid: u32, name: &str) {
        let st = self
            .post_task(
                "/nodes/pve1/qemu/100/clone",
                serde_json::json!({"newid": newid, "name": name}),
            )
            .await;
        assert_eq!(st, "OK");
    }
}

/// Sends a raw HTTP/1.1 request to a plain-HTTP simulator and returns the raw response text.
pub async fn raw_http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

pub fn plain_http() -> SimConfig {
    SimConfig {
        tls: false,
        ..SimConfig::default()
    }
}

impl Sim {
    /// PUTs and expects a UPID back; waits for the task and returns its exitstatus.
    pub async fn put_task(&self, path: &str, body: Value) -> String {
        let r = self.put(path, body).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        self.wait_task(r.json["data"].as_str().expect("UPID")).await
    }
}

/// Requests with another `Authorization` header (another token, or a ticket cookie).
pub struct As<'a> {
    pub sim: &'a Sim,
    pub auth: String,
}

impl Sim {
    /// Requests as the API token `id` with `secret`.
    pub fn as_token(&self, id: &str, secret: &str) -> As<'_> {
        As {
            sim: self,
            auth: format!("PVEAPIToken={id}={secret}"),
        }
    }
}

impl As<'_> {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Resp {
        let mut r = self
            .sim
            .client
            .request(method, format!("{}{path}", self.sim.base))
            .header("Authorization", &self.auth);
        if let Some(b) = body {
            r = r.json(&b);
        }
        reduce(r.send().await.expect("request")).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(reqwest::Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(reqwest::Method::DELETE, path, None).await
    }
}

/// A simulator playing `version` (instant profile).
pub async fn start_version(version: pve_sim::PveVersion) -> Sim {
    start(SimConfig {
        pve_version: Some(version),
        ..SimConfig::default()
    })
    .await
}
