//! Permission checks on the cluster (`PVE::RPCEnvironment::check`, `check_any`, `check_full`,
//! `check_vm_perm`). With enforcement off (no ACL configured) every check passes.

use std::collections::BTreeSet;

use super::Cluster;
use crate::access::perm_error;
use crate::error::ApiError;

impl Cluster {
    /// The pool whose ACLs count for `path` (`/vms/<vmid>` of a VM in a pool).
    fn pool_of_path(&self, path: &str) -> Option<&str> {
        let vmid: u32 = path.strip_prefix("/vms/")?.parse().ok()?;
        self.vms.get(&vmid)?.pool.as_deref()
    }

    /// Privileges of `who` (user or token id) on `path`.
    pub fn privileges(&self, who: &str, path: &str) -> BTreeSet<String> {
        self.access.privileges(who, path, self.pool_of_path(path))
    }

    /// Whether permissions are checked at all.
    pub fn enforced(&self, who: &str) -> bool {
        self.access.enforced && who != "root@pam" && !who.is_empty()
    }

    /// `check`: every privilege of `privs` on `path`; fails with the first missing one
    /// (`Permission check failed (/vms/100, VM.Audit)`). A privilege the version does not know is
    /// a 500 `invalid privilege`, as `verify_privname` dies.
    pub fn check(&self, who: &str, path: &str, privs: &[&str]) -> Result<(), ApiError> {
        self.check_full(who, path, privs, false)
    }

    /// `check_any`: one of `privs` (`Permission check failed (/vms/100, A|B)`).
    pub fn check_any(&self, who: &str, path: &str, privs: &[&str]) -> Result<(), ApiError> {
        self.check_full(who, path, privs, true)
    }

    /// `check_full`: [`Cluster::check`] or, with `any`, [`Cluster::check_any`].
    pub fn check_full(&self, who: &str, path: &str, privs: &[&str], any: bool) -> Result<(), ApiError> {
        if !self.enforced(who) {
            return Ok(());
        }
        if let Some(bad) = privs.iter().find(|p| !self.access.table.is_privilege(p)) {
            return Err(ApiError::server(format!("invalid privilege '{bad}'")));
        }
        let have = self.privileges(who, path);
        if any {
            if privs.iter().any(|p| have.contains(*p)) {
                Ok(())
            } else {
                Err(perm_error(Some(&format!("{path}, {}", privs.join("|")))))
            }
        } else {
            match privs.iter().find(|p| !have.contains(**p)) {
                Some(missing) => Err(perm_error(Some(&format!("{path}, {missing}")))),
                None => Ok(()),
            }
        }
    }

    /// Non-failing [`Cluster::check_full`].
    pub fn can(&self, who: &str, path: &str, privs: &[&str], any: bool) -> bool {
        self.check_full(who, path, privs, any).is_ok()
    }

    /// `check_vm_perm`: the privileges on `/pool/<pool>` (when given) or on `/vms/<vmid>`.
    pub fn check_vm_perm(
        &self,
        who: &str,
        vmid: u32,
        pool: Option<&str>,
        privs: &[&str],
        any: bool,
    ) -> Result<(), ApiError> {
        if let Some(p) = pool
            && self.can(who, &format!("/pool/{p}"), privs, any)
        {
            return Ok(());
        }
        self.check_full(who, &format!("/vms/{vmid}"), privs, any)
    }

    /// `check_pool_exist` (403 `Permission check failed (pool 'x' does not exist)`); pve-sim only
    /// knows pools when the scenario lists them.
    pub fn check_pool(&self, pool: Option<&str>) -> Result<(), ApiError> {
        match (pool, &self.pools) {
            (Some(p), Some(known)) if !known.contains(p) => {
                Err(perm_error(Some(&format!("pool '{p}' does not exist"))))
            }
            _ => Ok(()),
        }
    }

    /// `PVE::GuestHelpers::check_vnet_access` for a `netN` value: `SDN.Use` on the bridge in the
    /// `localnetwork` zone, or on each VLAN (`tag`, `trunks`) below it.
    pub fn check_bridge_access(&self, who: &str, net: &str) -> Result<(), ApiError> {
        if !self.enforced(who) {
            return Ok(());
        }
        let props = crate::propstr::to_map(net, Some("model"));
        let Some(bridge) = props.get("bridge") else {
            return Ok(());
        };
        let base = format!("/sdn/zones/localnetwork/{bridge}");
        if let Some(tag) = props.get("tag") {
            self.check(who, &format!("{base}/{tag}"), &["SDN.Use"])?;
        }
        if let Some(trunks) = props.get("trunks") {
            for part in trunks.split(';').filter(|t| !t.is_empty()) {
                let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                let (lo, hi): (u32, u32) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
                for tag in lo..=hi.min(4094) {
                    self.check(who, &format!("{base}/{tag}"), &["SDN.Use"])?;
                }
            }
        }
        if !props.contains_key("tag") && !props.contains_key("trunks") {
            self.check(who, &base, &["SDN.Use"])?;
        }
        Ok(())
    }

    /// `PVE::Storage::check_volume_access` (for reading a volume, no content type demanded).
    pub fn check_volume_access(&self, who: &str, vmid: Option<u32>, volid: &str) -> Result<(), ApiError> {
        if !self.enforced(who) {
            return Ok(());
        }
        let Some((sid, volname)) = volid.split_once(':') else {
            return Err(ApiError::server("Only root can pass arbitrary filesystem paths."));
        };
        let storage = format!("/storage/{sid}");
        if self.can(who, &storage, &["Datastore.Allocate"], false) {
            return Ok(());
        }
        let vtype = volname.split('/').next().unwrap_or_default();
        if matches!(vtype, "iso" | "vztmpl" | "import") {
            return self.check_any(who, &storage, &["Datastore.AllocateSpace", "Datastore.Audit"]);
        }
        let owner = crate::state::vm::volume_owner(volname);
        match owner {
            Some(o) if Some(o) == vmid => Ok(()),
            Some(o) => {
                self.check(who, &storage, &["Datastore.Audit"])?;
                self.check(who, &format!("/vms/{o}"), &["VM.Config.Disk"])
            }
            None => Err(ApiError::server(format!("missing privileges to access {volid}"))),
        }
    }
}
