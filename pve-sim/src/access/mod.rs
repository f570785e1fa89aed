//! Privileges per user and API token, as pve-access-control computes them
//! (`PVE::AccessControl::roles`, `PVE::RPCEnvironment::permissions`/`check`/`check_any`).
//!
//! Enforcement is off until the scenario (or a test) configures an ACL entry: then every
//! request is checked against what the schema of the version played says for its endpoint
//! ([`checks`]), and handlers run the checks PVE's handlers run (storage, bridge, mapping,
//! per-key config privileges).

pub mod checks;
pub mod roles;
pub mod vmconfig;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::error::ApiError;
use crate::version::PveVersion;
pub use roles::RoleTable;

/// One ACL entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclEntry {
    /// Normalised ACL path.
    pub path: String,
    /// User id (`capmox@pve`) or token id (`capmox@pve!capi`).
    pub subject: String,
    /// Role name.
    pub role: String,
    /// Whether it applies below `path` too.
    pub propagate: bool,
}

/// Users' and tokens' ACL entries, custom roles and the version's built-in roles.
#[derive(Debug, Clone)]
pub struct Access {
    /// Whether requests are checked at all (on once an ACL entry was configured).
    pub enforced: bool,
    /// Built-in roles and valid privileges of the version played.
    pub table: RoleTable,
    /// Custom roles (privileges the version does not know are dropped).
    pub custom: BTreeMap<String, BTreeSet<String>>,
    /// ACL entries.
    pub acl: Vec<AclEntry>,
    /// Token id → privilege separation (absent: separated, PVE's default).
    pub privsep: BTreeMap<String, bool>,
}

/// A role name that is neither built in nor defined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("role '{0}' does not exist")]
pub struct UnknownRole(pub String);

static CHECK_PATH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let alnum = r"[[:alnum:]\.\-_]+";
    Regex::new(&format!(
        r"^(?:/|/access|/access/groups|/access/groups/{alnum}|/access/realm|/access/realm/{alnum}|/nodes|/nodes/{alnum}|/pool|/pool/[A-Za-z0-9\.\-_]+(?:/[A-Za-z0-9\.\-_]+){{0,2}}|/sdn|/sdn/controllers|/sdn/controllers/[[:alnum:]_\-]+|/sdn/dns|/sdn/dns/[[:alnum:]]+|/sdn/fabrics|/sdn/fabrics/[[:alnum:]]+|/sdn/ipams|/sdn/ipams/[[:alnum:]]+|/sdn/zones|/sdn/zones/{alnum}|/sdn/zones/{alnum}/{alnum}|/sdn/zones/{alnum}/{alnum}/[1-9][0-9]{{0,3}}|/storage|/storage/{alnum}|/vms|/vms/[1-9][0-9]{{2,}}|/mapping|/mapping/{alnum}|/mapping/{alnum}/{alnum})$"
    ))
    .ok()
});

/// `PVE::AccessControl::normalize_path`: leading `/`, no doubled or trailing `/`, and only the
/// paths PVE knows (`check_path`).
pub fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let mut p = String::from("/");
    p.push_str(
        &path
            .split('/')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/"),
    );
    CHECK_PATH.as_ref()?.is_match(&p).then_some(p)
}

/// `Permission check failed (<what>)` (403), PVE's `raise_perm_exc`.
pub fn perm_error(what: Option<&str>) -> ApiError {
    match what {
        Some(w) => ApiError::status(403, format!("Permission check failed ({w})")),
        None => ApiError::status(403, "Permission check failed"),
    }
}

/// The ACL path prefixes of `path`, root first (`/vms/100` → `/`, `/vms`, `/vms/100`).
fn prefixes(path: &str) -> Vec<String> {
    let mut out = vec!["/".to_string()];
    let mut cur = String::new();
    for part in path.split('/').filter(|s| !s.is_empty()) {
        cur.push('/');
        cur.push_str(part);
        out.push(cur.clone());
    }
    out
}

/// The owning user of a token id (`user@realm!name` → `user@realm`).
pub fn token_user(id: &str) -> Option<&str> {
    id.split_once('!').map(|(u, _)| u)
}

impl Access {
    /// No ACL entries, no custom roles, not enforced.
    pub fn new(version: PveVersion) -> Self {
        Self {
            enforced: false,
            table: RoleTable::new(version),
            custom: BTreeMap::new(),
            acl: Vec::new(),
            privsep: BTreeMap::new(),
        }
    }

    /// Defines (or replaces) a custom role; privileges the version does not know are dropped.
    pub fn define_role(&mut self, name: &str, privs: &[String]) {
        let known: BTreeSet<String> = privs
            .iter()
            .filter(|p| {
                let ok = self.table.is_privilege(p);
                if !ok {
                    tracing::warn!(role = name, privilege = %p, "ignoring invalid privilege");
                }
                ok
            })
            .cloned()
            .collect();
        self.custom.insert(name.to_owned(), known);
    }

    /// Whether a role exists.
    pub fn role_exists(&self, role: &str) -> bool {
        self.table.roles.contains_key(role) || self.custom.contains_key(role)
    }

    /// Adds or replaces the entry (path, subject, role) and turns enforcement on.
    pub fn set_acl(
        &mut self,
        subject: &str,
        path: &str,
        role: &str,
        propagate: bool,
    ) -> Result<(), UnknownRole> {
        if !self.role_exists(role) {
            return Err(UnknownRole(role.to_owned()));
        }
        let path = normalize_path(path).unwrap_or_else(|| path.to_owned());
        self.acl
            .retain(|e| !(e.path == path && e.subject == subject && e.role == role));
        self.acl.push(AclEntry {
            path,
            subject: subject.to_owned(),
            role: role.to_owned(),
            propagate,
        });
        self.enforced = true;
        Ok(())
    }

    /// Removes every entry of `subject` (enforcement stays as it is).
    pub fn clear_acl(&mut self, subject: &str) {
        self.acl.retain(|e| e.subject != subject);
    }

    /// Roles of `subject` on `path` with their propagate flags (`PVE::AccessControl::roles`
    /// without groups): walking from `/` down, a level with entries for the subject replaces
    /// what was inherited; entries apply on their own path, and below it only when propagated.
    fn roles(&self, subject: &str, path: &str) -> BTreeMap<String, bool> {
        let levels = prefixes(path);
        let last = levels.len() - 1;
        let mut roles = BTreeMap::new();
        for (i, level) in levels.iter().enumerate() {
            let new: BTreeMap<String, bool> = self
                .acl
                .iter()
                .filter(|e| e.subject == subject && &e.path == level && (i == last || e.propagate))
                .map(|e| (e.role.clone(), e.propagate))
                .collect();
            if !new.is_empty() {
                roles = new;
            }
        }
        if let Some(p) = roles.get("NoAccess").copied() {
            return [("NoAccess".to_string(), p)].into_iter().collect();
        }
        roles
    }

    fn role_privs(&self, role: &str) -> BTreeSet<String> {
        if let Some(r) = self.table.roles.get(role) {
            return r.iter().map(|p| (*p).to_owned()).collect();
        }
        self.custom.get(role).cloned().unwrap_or_default()
    }

    /// Privileges of one subject (without token/user intersection); `pool` is the pool of the VM
    /// when `path` is `/vms/<vmid>` (pool ACLs count for member VMs, never propagated further).
    fn compile(&self, subject: &str, path: &str, pool: Option<&str>) -> BTreeSet<String> {
        let mut roles = self.roles(subject, path);
        if let Some(pool) = pool
            && !roles.contains_key("NoAccess")
        {
            let pool_roles = self.roles(subject, &format!("/pool/{pool}"));
            if pool_roles.contains_key("NoAccess") {
                roles = [("NoAccess".to_string(), false)].into_iter().collect();
            } else {
                for r in pool_roles.into_keys() {
                    roles.entry(r).or_insert(false);
                }
            }
        }
        roles.keys().flat_map(|r| self.role_privs(r)).collect()
    }

    /// The privileges `who` (user or token id) has on `path`.
    pub fn privileges(&self, who: &str, path: &str, pool: Option<&str>) -> BTreeSet<String> {
        if who == "root@pam" {
            return self.table.privileges.iter().map(|p| (*p).to_owned()).collect();
        }
        let Some(user) = token_user(who) else {
            return self.compile(who, path, pool);
        };
        let user_privs = self.privileges(user, path, pool);
        if !self.privsep.get(who).copied().unwrap_or(true) {
            return user_privs;
        }
        let token_privs = self.compile(who, path, pool);
        if user == "root@pam" {
            return token_privs;
        }
        token_privs.intersection(&user_privs).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        let mut a = Access::new(PveVersion::V9_1);
        a.set_acl("u@pve", "/", "PVEVMAdmin", true).unwrap();
        a.set_acl("u@pve!t", "/vms", "PVEVMUser", true).unwrap();
        a.set_acl("u@pve!t", "/vms/101", "NoAccess", false).unwrap();
        a.set_acl("u@pve!t", "/pool/capi", "PVEVMAdmin", true).unwrap();
        a
    }

    #[test]
    fn paths_are_normalised_and_checked() {
        assert_eq!(normalize_path("vms//100/").as_deref(), Some("/vms/100"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert!(normalize_path("/vms/abc").is_none());
        assert!(normalize_path("/sdn/zones/localnetwork/vmbr0/100").is_some());
        assert!(normalize_path("/mapping/pci/gpu").is_some());
    }

    #[test]
    fn propagation_noaccess_pools_and_token_intersection() {
        let a = access();
        let p = a.privileges("u@pve!t", "/vms/100", None);
        assert!(p.contains("VM.PowerMgmt") && !p.contains("VM.Allocate"));
        assert!(a.privileges("u@pve!t", "/vms/101", None).is_empty());
        // Pool ACLs count for member VMs; the owner has PVEVMAdmin on / so the intersection keeps it.
        assert!(
            a.privileges("u@pve!t", "/vms/100", Some("capi"))
                .contains("VM.Allocate")
        );
        // NoAccess on the VM itself is not trumped by the pool.
        assert!(a.privileges("u@pve!t", "/vms/101", Some("capi")).is_empty());
        // The user lacks Datastore privileges, so the token does too.
        assert!(a.privileges("u@pve!t", "/storage/local", None).is_empty());
        assert!(a.privileges("root@pam", "/anything", None).contains("Sys.Modify"));
    }
}
