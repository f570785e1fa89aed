//! The `User-Agent` every client of the manager sends (`capmox-rs/<version>`), so an administrator
//! can tell its requests apart in Kubernetes audit logs and Proxmox's access log, and the
//! Kubernetes client that carries it.

use http::HeaderValue;
use http::header::USER_AGENT as USER_AGENT_HEADER;

/// `capmox-rs/<crate version>`.
pub const USER_AGENT: &str = concat!("capmox-rs/", env!("CARGO_PKG_VERSION"));

/// Adds the `User-Agent` header to a Kubernetes client configuration (replacing one set before).
pub fn with_user_agent(mut config: kube::Config) -> kube::Config {
    config.headers.retain(|(name, _)| name != USER_AGENT_HEADER);
    config
        .headers
        .push((USER_AGENT_HEADER, HeaderValue::from_static(USER_AGENT)));
    config
}

/// The manager's Kubernetes client: the inferred configuration (kubeconfig or in-cluster) with
/// the `User-Agent` header.
pub async fn kube_client() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer().await.map_err(kube::Error::InferConfig)?;
    kube::Client::try_from(with_user_agent(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_names_the_crate_and_version() {
        assert!(USER_AGENT.starts_with("capmox-rs/"));
        assert_eq!(
            crate::proxmox::ClientConfig::new(
                "https://pve:8006",
                crate::proxmox::Credentials::token("a@pve!t", "s")
            )
            .user_agent,
            USER_AGENT
        );
        let uri: http::Uri = "https://127.0.0.1:6443".parse().unwrap();
        let cfg = with_user_agent(with_user_agent(kube::Config::new(uri)));
        let agents: Vec<_> = cfg
            .headers
            .iter()
            .filter(|(n, _)| n == USER_AGENT_HEADER)
            .map(|(_, v)| v.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(agents, vec![USER_AGENT.to_owned()]);
    }
}
