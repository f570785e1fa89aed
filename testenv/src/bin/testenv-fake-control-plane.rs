//! Stand-in for `kube-apiserver` and `etcd` used to exercise testenv's real-binary plumbing (process
//! start, flags, certificates, token file, readiness) where the real binaries are unavailable.
//! Invoked with kube-apiserver flags it serves the in-tree API server on `--secure-port` with
//! `--tls-cert-file`/`--tls-private-key-file` and the token from `--token-auth-file`; invoked with
//! etcd flags it checks them and idles.

use std::collections::HashMap;

fn flags() -> HashMap<String, String> {
    std::env::args()
        .skip(1)
        .filter_map(|a| {
            a.strip_prefix("--")
                .and_then(|f| f.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn need<'a>(f: &'a HashMap<String, String>, k: &str) -> Result<&'a str, String> {
    f.get(k)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("missing required flag --{k}"))
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))
}

async fn apiserver(f: &HashMap<String, String>) -> Result<(), String> {
    for k in [
        "etcd-servers",
        "client-ca-file",
        "service-account-key-file",
        "service-account-signing-key-file",
        "service-account-issuer",
        "cert-dir",
    ] {
        need(f, k)?;
    }
    let port: u16 = need(f, "secure-port")?
        .parse()
        .map_err(|e| format!("--secure-port: {e}"))?;
    let certs = testenv::certs::Certs {
        ca_pem: read(need(f, "client-ca-file")?)?,
        ca_key_pem: String::new(),
        serving_pem: read(need(f, "tls-cert-file")?)?,
        serving_key_pem: read(need(f, "tls-private-key-file")?)?,
    };
    let tokens = read(need(f, "token-auth-file")?)?;
    let line = tokens.lines().next().ok_or("empty token file")?;
    let cols: Vec<&str> = line.splitn(4, ',').collect();
    if cols.len() < 4 || !cols[3].contains("system:masters") {
        return Err(format!(
            "token file line must be token,user,uid,\"groups\" with system:masters: {}",
            cols.get(1).unwrap_or(&"")
        ));
    }
    let opts = testenv::ServerOptions {
        bind: Some(([127, 0, 0, 1], port).into()),
        ..Default::default()
    };
    let _server = testenv::server::start(&certs, cols[0], opts)
        .await
        .map_err(|e| e.to_string())?;
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::main]
async fn main() {
    let f = flags();
    let result = if f.contains_key("etcd-servers") {
        apiserver(&f).await
    } else {
        match [
            "data-dir",
            "listen-client-urls",
            "advertise-client-urls",
            "listen-peer-urls",
        ]
        .iter()
        .try_for_each(|k| need(&f, k).map(|_| ()))
        {
            Ok(()) => {
                std::future::pending::<()>().await;
                Ok(())
            }
            Err(e) => Err(e),
        }
    };
    if let Err(e) = result {
        eprintln!("testenv-fake-control-plane: {e}");
        std::process::exit(2);
    }
}
