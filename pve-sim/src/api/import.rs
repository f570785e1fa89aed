//! `import-from` on disk creation (`POST /nodes/{node}/qemu` with
//! `scsi0: <storage>:0,import-from=<source>`), as qemu-server's `API2/Qemu.pm` does it:
//! synchronously the special syntax (`check_drive_param`) and the source's content type
//! (`check_storage_access`: `images` or `import`), then in the create task the copy of the
//! source into a new disk of the source's (virtual) size (`create_disks` → `clone_disk`). A
//! source file that is gone fails the task (`failed to stat '<path>'`), and the create task then
//! removes the VM it began (`unable to create VM <vmid> - …`).

use crate::error::ApiError;
use crate::propstr;
use crate::state::Cluster;

use super::download::{virtual_size, volume_path};

/// The content type of a volume name (`import/x.qcow2` → `import`, `vm-100-disk-0` → `images`).
fn vtype(volname: &str) -> &str {
    match volname.split_once('/') {
        Some(("iso", _)) => "iso",
        Some(("vztmpl", _)) => "vztmpl",
        Some(("import", _)) => "import",
        Some(("snippets", _)) => "snippets",
        Some(("dump", _)) => "backup",
        Some(("images", _)) => "images",
        _ if volname.starts_with("vm-") || volname.starts_with("base-") => "images",
        _ => "images",
    }
}

/// The source of a drive's `import-from`, checked as PVE checks it before the task (`None`: the
/// drive imports nothing).
pub fn check(c: &Cluster, node: &str, key: &str, value: &str) -> Result<Option<String>, ApiError> {
    let Ok(props) = propstr::parse(value, Some("file")) else {
        return Ok(None);
    };
    let Some(source) = propstr::get(&props, "import-from").map(str::to_owned) else {
        return Ok(None);
    };
    let file = propstr::get(&props, "file").unwrap_or_default();
    let new_disk_zero = file
        .split_once(':')
        .is_some_and(|(s, n)| !s.is_empty() && n.parse::<f64>() == Ok(0.0));
    if !new_disk_zero {
        return Err(ApiError::param(
            key,
            "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
        ));
    }
    let Some((storage, volname)) = source.split_once(':') else {
        return Err(ApiError::server(
            "pve-sim: import-from an absolute path is not simulated",
        ));
    };
    if c.storage_on(node, storage).is_none() {
        return Err(ApiError::server(format!("storage '{storage}' does not exist")));
    }
    let t = vtype(volname);
    if t != "images" && t != "import" {
        return Err(ApiError::param(
            key,
            format!("{source} has wrong type '{t}' - needs to be 'images' or 'import'"),
        ));
    }
    if t == "images" {
        return Err(ApiError::server(
            "pve-sim: import-from another VM's disk is not simulated",
        ));
    }
    Ok(Some(source))
}

/// Inside the create task: copies `source` into the disk `value` (`<storage>:vm-<id>-disk-<n>,
/// import-from=…` as allocated before the task) and returns the drive's final value with the
/// task's log lines (`Err`: why the import failed).
pub fn apply(
    c: &Cluster,
    node: &str,
    key: &str,
    source: &str,
    value: &str,
) -> Result<(String, Vec<String>), String> {
    let volume = c
        .find_volume(node, source)
        .ok_or_else(|| format!("failed to stat '{}'", volume_path(source)))?;
    let size = virtual_size(&volume.format, &volume.data);
    let props = propstr::parse(value, Some("file")).map_err(|e| e.to_string())?;
    let file = propstr::get(&props, "file").unwrap_or_default().to_owned();
    let mut out = file.clone();
    for (k, v) in &props {
        if !matches!(k.as_str(), "file" | "size" | "import-from") {
            out.push_str(&format!(",{k}={v}"));
        }
    }
    out.push_str(&format!(",size={}", propstr::format_size(size)));
    let human = format!("{:.1} GiB", size as f64 / f64::from(1u32 << 30));
    Ok((
        out.clone(),
        vec![
            format!("create full clone of drive ({source})"),
            format!("allocated target volume '{file}'"),
            format!("transferred 0.0 B of {human} (0.00%)"),
            format!("transferred {human} of {human} (100.00%)"),
            format!("{key}: successfully created disk '{out}'"),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(vtype("import/noble.qcow2"), "import");
        assert_eq!(vtype("iso/x.iso"), "iso");
        assert_eq!(vtype("vm-100-disk-0"), "images");
    }
}
