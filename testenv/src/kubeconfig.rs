//! Kubeconfig generation for a running control plane.

use base64::Engine;
use kube::config::Kubeconfig;

use crate::Error;

/// Renders a kubeconfig (YAML) for `server` (an `https://` URL), trusting `ca_pem` and authenticating
/// with the bearer `token`; `kubectl` and kube-rs both read it.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: testenv-admin\n  user:\n    token: {token}\ncontexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: testenv-admin\n    namespace: default\ncurrent-context: testenv\n"
    )
}

/// Builds the same kubeconfig as a value.
pub fn build(server: &str, ca_pem: &str, token: &str) -> Result<Kubeconfig, Error> {
    Ok(Kubeconfig::from_yaml(&render(server, ca_pem, token))?)
}
