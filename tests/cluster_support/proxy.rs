//! A TCP forwarder in front of pve-sim that can be switched off (existing connections are cut,
//! new ones are closed at once), so the controller sees a real network failure.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A switchable TCP proxy.
pub struct Proxy {
    addr: SocketAddr,
    up: watch::Sender<bool>,
}

impl Proxy {
    /// Listens on a free local port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (up, rx) = watch::channel(true);
        tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !*rx.borrow() {
                    drop(inbound);
                    continue;
                }
                let mut rx = rx.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let mut inbound = inbound;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Self { addr, up }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Cuts all connections and refuses new ones (`false`), or forwards again (`true`).
    pub fn set_up(&self, up: bool) {
        let _ = self.up.send(up);
    }
}
