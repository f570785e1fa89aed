//! capmox's ProxmoxCluster and ProxmoxClusterTemplate webhooks (both defaulters are no-ops):
//! an IP pool configuration is required on create, and unless `externalManagedControlPlane` the
//! control-plane endpoint must be a hostname or an IP outside the node IP pools. Field paths and
//! messages are capmox's, including its Go-style paths (`spec.controlplaneEndpoint`,
//! `spec.IPv4Config.addresses`) and its reuse of the cluster paths for templates.
//! Added: `failureDomainsFromZones` needs a `zoneConfig` to take the zones from; a cluster
//! without IP pools (every machine on DHCP) is accepted when its control-plane endpoint is static.

use std::net::IpAddr;
use std::sync::LazyLock;

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterTemplate};
use ipnet::IpNet;
use regex::Regex;
use serde_json::json;

use super::field::{FieldError, Verdict, denied, invalid};

/// capmox's message, plus what a cluster whose machines all use DHCP needs instead (capmox-rs).
const NO_POOL: &str = "proxmox cluster must define at least one IP pool config (a cluster whose machines all use DHCP needs no IP pool, but a static controlPlaneEndpoint)";

/// capmox's `isHostname`: a short name or an FQDN with an alphabetic TLD, case-insensitive.
static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let shortname = r"([a-z0-9]{1,253}|[a-z0-9][a-z0-9-]{1,251}[a-z0-9])";
    let hostname = r"([a-z0-9]{1,63}|[a-z0-9][a-z0-9-]{1,61}[a-z0-9]\.)?";
    let domain = r"((([a-z0-9]{1,63}|[a-z0-9][a-z0-9-]{1,61}[a-z0-9])\.)+?[a-z]{2,63})";
    regex::RegexBuilder::new(&format!("(?i)^({shortname}|{hostname}{domain})$"))
        .size_limit(64 << 20)
        .build()
        .map_err(|e| tracing::error!(error = %e, "hostname pattern does not compile"))
        .ok()
});

fn is_hostname(host: &str) -> bool {
    HOSTNAME.as_ref().is_some_and(|re| re.is_match(host))
}

/// One entry of `addresses`: an IP, a CIDR or a range `a-b` (same family, `a <= b`).
enum Pool {
    Net(IpNet),
    Range(IpAddr, IpAddr),
}

impl Pool {
    fn parse(s: &str) -> Option<Pool> {
        if let Some((from, to)) = s.split_once('-') {
            let (from, to): (IpAddr, IpAddr) = (from.parse().ok()?, to.parse().ok()?);
            return (from.is_ipv4() == to.is_ipv4() && from <= to).then_some(Pool::Range(from, to));
        }
        if s.contains('/') {
            return s.parse().ok().map(Pool::Net);
        }
        s.parse::<IpAddr>().ok().map(|ip| Pool::Net(IpNet::from(ip)))
    }

    fn contains(&self, ip: IpAddr) -> bool {
        match self {
            Pool::Net(n) => n.contains(&ip),
            Pool::Range(from, to) => from.is_ipv4() == ip.is_ipv4() && *from <= ip && ip <= *to,
        }
    }
}

/// capmox's `validateControlPlaneEndpoint`.
fn endpoint(spec: &ProxmoxClusterSpec) -> Option<FieldError> {
    if spec.external_managed_control_plane == Some(true) {
        return None;
    }
    let host = spec
        .control_plane_endpoint
        .as_ref()
        .and_then(|e| e.host.as_deref())
        .unwrap_or_default();
    if is_hostname(host) {
        return None;
    }
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Some(FieldError::invalid(
            "spec.controlplaneEndpoint",
            json!(host),
            "provided endpoint address is not a valid IP or FQDN",
        ));
    };
    for (path, cfg) in [
        ("spec.IPv4Config.addresses", &spec.ipv4_config),
        ("spec.IPv6Config.addresses", &spec.ipv6_config),
    ] {
        let Some(cfg) = cfg else { continue };
        let pools: Option<Vec<Pool>> = cfg.addresses.iter().map(|a| Pool::parse(a)).collect();
        let Some(pools) = pools else {
            return Some(FieldError::invalid(
                path,
                json!(cfg.addresses),
                "provided addresses are not valid IP addresses, ranges or CIDRs",
            ));
        };
        if pools.iter().any(|p| p.contains(ip)) {
            return Some(FieldError::invalid(
                path,
                json!(cfg.addresses),
                "addresses may not contain the endpoint IP",
            ));
        }
    }
    None
}

/// Our addition: `failureDomainsFromZones` publishes `zoneConfig` zones, so it needs some.
fn failure_domains(spec: &ProxmoxClusterSpec, path: &str) -> Option<FieldError> {
    let zones = spec.zone_config.as_ref().map_or(0, Vec::len);
    (spec.failure_domains_from_zones == Some(true) && zones == 0).then(|| {
        FieldError::invalid(
            path,
            json!(true),
            "requires at least one zoneConfig entry to publish as failure domains",
        )
    })
}

/// No IP pool and nothing that makes a DHCP-only cluster acceptable: a static control-plane
/// endpoint (set, or left to an external control-plane provider such as Kamaji).
fn no_pool(spec: &ProxmoxClusterSpec) -> bool {
    let static_endpoint = spec.external_managed_control_plane == Some(true)
        || spec
            .control_plane_endpoint
            .as_ref()
            .and_then(|e| e.host.as_deref())
            .is_some_and(|h| !h.is_empty());
    spec.ipv4_config.is_none() && spec.ipv6_config.is_none() && !static_endpoint
}

const CLUSTER: &str = "ProxmoxCluster";
const TEMPLATE: &str = "ProxmoxClusterTemplate";

fn name_of(meta: &kube::api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// ProxmoxCluster create.
pub fn validate_cluster_create(c: &ProxmoxCluster) -> Verdict {
    let name = name_of(&c.metadata);
    if no_pool(&c.spec) {
        return Verdict::deny(denied(NO_POOL)).warn(format!("proxmox cluster {name}: {NO_POOL}"));
    }
    if let Some(e) = endpoint(&c.spec) {
        return Verdict::deny(invalid(CLUSTER, name, &[e]))
            .warn(format!("cannot create proxmox cluster {name}"));
    }
    additive(&c.spec, CLUSTER, name, "spec.failureDomainsFromZones")
}

/// ProxmoxCluster update.
pub fn validate_cluster_update(c: &ProxmoxCluster) -> Verdict {
    let name = name_of(&c.metadata);
    if let Some(e) = endpoint(&c.spec) {
        return Verdict::deny(invalid(CLUSTER, name, &[e]))
            .warn(format!("cannot update proxmox cluster {name}"));
    }
    additive(&c.spec, CLUSTER, name, "spec.failureDomainsFromZones")
}

/// ProxmoxClusterTemplate create (the cluster rules on `spec.template.spec`).
pub fn validate_template_create(t: &ProxmoxClusterTemplate) -> Verdict {
    let name = name_of(&t.metadata);
    let spec = &t.spec.template.spec;
    if no_pool(spec) {
        return Verdict::deny(denied(NO_POOL)).warn(format!("proxmox cluster template {name}: {NO_POOL}"));
    }
    if let Some(e) = endpoint(spec) {
        return Verdict::deny(invalid(TEMPLATE, name, &[e]))
            .warn(format!("cannot create proxmox cluster template {name}"));
    }
    additive(spec, TEMPLATE, name, "spec.template.spec.failureDomainsFromZones")
}

/// ProxmoxClusterTemplate update.
pub fn validate_template_update(t: &ProxmoxClusterTemplate) -> Verdict {
    let name = name_of(&t.metadata);
    let spec = &t.spec.template.spec;
    if let Some(e) = endpoint(spec) {
        return Verdict::deny(invalid(TEMPLATE, name, &[e]))
            .warn(format!("cannot update proxmox cluster {name}"));
    }
    additive(spec, TEMPLATE, name, "spec.template.spec.failureDomainsFromZones")
}

fn additive(spec: &ProxmoxClusterSpec, kind: &str, name: &str, path: &str) -> Verdict {
    match failure_domains(spec, path) {
        Some(e) => Verdict::deny(invalid(kind, name, &[e])),
        None => Verdict::allow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dhcp_only_clusters_need_a_static_endpoint() {
        let mut spec = ProxmoxClusterSpec::default();
        assert!(no_pool(&spec));
        spec.external_managed_control_plane = Some(true);
        assert!(!no_pool(&spec));
        spec.external_managed_control_plane = None;
        spec.control_plane_endpoint = Some(capmox_api::v1alpha2::ApiEndpoint {
            host: Some("10.0.0.5".into()),
            port: Some(6443),
        });
        assert!(!no_pool(&spec));
        let mut c = ProxmoxCluster::new("c", spec);
        assert!(validate_cluster_create(&c).denial.is_none());
        c.spec.control_plane_endpoint = None;
        let v = validate_cluster_create(&c);
        let message = v.denial.map(|d| d.message).unwrap_or_default();
        assert!(message.contains("static controlPlaneEndpoint"), "{message}");
    }

    #[test]
    fn hostnames_like_capmox() {
        for ok in [
            "localhost",
            "api.example.com",
            "API.Example.COM",
            "k8s-api.internal.example.io",
            "12345",
        ] {
            assert!(is_hostname(ok), "{ok}");
        }
        for bad in [
            "10.0.0.1",
            "_this.is.a.txt.record",
            "foo_bar",
            "",
            "-a.example.com",
            "example.c0m",
        ] {
            assert!(!is_hostname(bad), "{bad}");
        }
    }

    #[test]
    fn pools_parse_and_contain() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let r = Pool::parse("10.0.0.10-10.0.0.20").unwrap();
        assert!(r.contains(ip("10.0.0.15")) && !r.contains(ip("10.0.0.21")));
        assert!(Pool::parse("10.0.0.0/24").unwrap().contains(ip("10.0.0.200")));
        assert!(Pool::parse("10.0.0.5/24").unwrap().contains(ip("10.0.0.1")));
        assert!(Pool::parse("2001:db8::1").unwrap().contains(ip("2001:db8::1")));
        assert!(Pool::parse("10.0.0.20-10.0.0.10").is_none());
        assert!(Pool::parse("10.0.0.1-2001:db8::1").is_none());
        assert!(Pool::parse("10.0.0.x").is_none());
    }
}
