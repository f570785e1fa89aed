//! PVE's privileges and built-in roles per version, built as pve-access-control's
//! `PVE::AccessControl::create_roles` builds them from its `$privgroups` table (8.4:
//! branch `stable-bookworm`; 9.x: `master`, where `VM.Monitor` was dropped and
//! `VM.GuestAgent.*` and `VM.Replicate` were added in July 2025).

use std::collections::{BTreeMap, BTreeSet};

use crate::version::PveVersion;

/// One privilege category: root-only, admin, user and audit privileges.
struct Category {
    name: &'static str,
    root: &'static [&'static str],
    admin: &'static [&'static str],
    user: &'static [&'static str],
    audit: &'static [&'static str],
}

const VM_ADMIN_84: &[&str] = &[
    "VM.Config.Disk",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.HWType",
    "VM.Config.Options",
    "VM.Allocate",
    "VM.Clone",
    "VM.Migrate",
    "VM.Monitor",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];
const VM_USER_84: &[&str] = &[
    "VM.Config.CDROM",
    "VM.Config.Cloudinit",
    "VM.Console",
    "VM.Backup",
    "VM.PowerMgmt",
];
const VM_ADMIN_91: &[&str] = &[
    "VM.Config.Disk",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.HWType",
    "VM.Config.Options",
    "VM.Allocate",
    "VM.Clone",
    "VM.GuestAgent.Unrestricted",
    "VM.Migrate",
    "VM.Replicate",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];
const VM_USER_91: &[&str] = &[
    "VM.Config.CDROM",
    "VM.Config.Cloudinit",
    "VM.Console",
    "VM.Backup",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.PowerMgmt",
];

/// The categories other than `VM` (the same on 8.4 and 9.1).
const OTHER: &[Category] = &[
    Category {
        name: "Sys",
        root: &["Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"],
        admin: &["Sys.Console", "Sys.Syslog"],
        user: &[],
        audit: &["Sys.Audit"],
    },
    Category {
        name: "Datastore",
        root: &[],
        admin: &["Datastore.Allocate", "Datastore.AllocateTemplate"],
        user: &["Datastore.AllocateSpace"],
        audit: &["Datastore.Audit"],
    },
    Category {
        name: "SDN",
        root: &[],
        admin: &["SDN.Allocate", "SDN.Audit"],
        user: &["SDN.Use"],
        audit: &["SDN.Audit"],
    },
    Category {
        name: "User",
        root: &["Realm.Allocate"],
        admin: &["User.Modify", "Group.Allocate", "Realm.AllocateUser"],
        user: &[],
        audit: &[],
    },
    Category {
        name: "Pool",
        root: &[],
        admin: &["Pool.Allocate"],
        user: &["Pool.Audit"],
        audit: &["Pool.Audit"],
    },
    Category {
        name: "Mapping",
        root: &[],
        admin: &["Mapping.Modify"],
        user: &["Mapping.Use"],
        audit: &["Mapping.Audit"],
    },
];

/// The privilege table and built-in roles of one version.
#[derive(Debug, Clone)]
pub struct RoleTable {
    /// Every valid privilege.
    pub privileges: BTreeSet<&'static str>,
    /// Built-in ("special") roles.
    pub roles: BTreeMap<String, BTreeSet<&'static str>>,
}

fn vm_category(version: PveVersion) -> Category {
    let (admin, user, audit): (
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    ) = match version {
        PveVersion::V8_4 => (VM_ADMIN_84, VM_USER_84, &["VM.Audit"]),
        PveVersion::V9_1 => (VM_ADMIN_91, VM_USER_91, &["VM.Audit", "VM.GuestAgent.Audit"]),
    };
    Category {
        name: "VM",
        root: &[],
        admin,
        user,
        audit,
    }
}

impl RoleTable {
    /// The table of `version`.
    pub fn new(version: PveVersion) -> Self {
        let vm = vm_category(version);
        let mut privileges: BTreeSet<&'static str> = ["Permissions.Modify"].into_iter().collect();
        let mut roles: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
        roles.insert("NoAccess".into(), BTreeSet::new());
        for cat in std::iter::once(&vm).chain(OTHER.iter()) {
            privileges.extend(cat.root.iter().chain(cat.admin).chain(cat.user).chain(cat.audit));
            for p in cat.admin.iter().chain(cat.user).chain(cat.audit) {
                roles
                    .entry(format!("PVE{}Admin", cat.name))
                    .or_default()
                    .insert(p);
                roles.entry("PVEAdmin".into()).or_default().insert(p);
            }
            if !cat.user.is_empty() {
                for p in cat.user.iter().chain(cat.audit) {
                    roles.entry(format!("PVE{}User", cat.name)).or_default().insert(p);
                }
            }
            for p in cat.audit {
                roles.entry("PVEAuditor".into()).or_default().insert(p);
            }
        }
        if let Some(admin) = roles.get_mut("PVEAdmin") {
            admin.remove("Mapping.Modify");
        }
        roles.insert(
            "PVETemplateUser".into(),
            ["VM.Clone", "VM.Audit"].into_iter().collect(),
        );
        roles.insert("Administrator".into(), privileges.clone());
        Self { privileges, roles }
    }

    /// Whether `priv_name` is a privilege of this version.
    pub fn is_privilege(&self, priv_name: &str) -> bool {
        self.privileges.contains(priv_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_roles_per_version() {
        let t84 = RoleTable::new(PveVersion::V8_4);
        let t91 = RoleTable::new(PveVersion::V9_1);
        assert!(t84.roles["PVEVMAdmin"].contains("VM.Monitor"));
        assert!(!t91.is_privilege("VM.Monitor"));
        assert!(t91.roles["PVEVMAdmin"].contains("VM.GuestAgent.Unrestricted"));
        assert!(t91.roles["PVEVMUser"].contains("VM.GuestAgent.FileRead"));
        assert!(!t91.roles["PVEVMUser"].contains("VM.GuestAgent.Unrestricted"));
        assert!(t91.roles["PVEAuditor"].contains("VM.GuestAgent.Audit"));
        assert_eq!(
            t84.roles["PVEDatastoreUser"],
            ["Datastore.AllocateSpace", "Datastore.Audit"]
                .into_iter()
                .collect()
        );
        assert_eq!(
            t84.roles["PVESDNUser"],
            ["SDN.Use", "SDN.Audit"].into_iter().collect()
        );
        assert!(!t84.roles["PVEAdmin"].contains("Mapping.Modify"));
        assert!(t84.roles["Administrator"].contains("Sys.Modify"));
        assert!(!t84.roles.contains_key("PVESysUser"));
        assert!(t84.roles["NoAccess"].is_empty());
    }
}
