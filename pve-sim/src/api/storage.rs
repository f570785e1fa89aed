//! Storage list/status, content list/get/delete, ISO upload.

use serde_json::{Map, Value, json};

use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::propstr;
use crate::state::{Cluster, Storage, Volume};
use crate::tasks::{self, TaskSpec, now_epoch};

/// The uploaded file of an upload request.
#[derive(Clone)]
pub struct UploadFile {
    /// Target file name (from the part's `filename` attribute).
    pub name: String,
    /// Content.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for UploadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadFile")
            .field("name", &self.name)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// Parses the multipart upload body: simple fields first, then the file part named `filename`.
/// Fields after the file part are ignored, as PVE stops parsing at the file.
pub fn parse_upload(
    body: &[u8],
    content_type: &str,
    params: &mut Map<String, Value>,
) -> Result<Option<UploadFile>, ApiError> {
    let boundary = crate::multipart::boundary(content_type)
        .ok_or_else(|| ApiError::status(400, "missing boundary in multipart/form-data"))?;
    let parts = crate::multipart::parse(body, &boundary)
        .ok_or_else(|| ApiError::status(400, "malformed multipart/form-data body"))?;
    for part in parts {
        match part.filename {
            Some(filename) => {
                if part.name != "filename" {
                    return Err(ApiError::server(format!(
                        "wrong field name '{}' for file upload, expected 'filename'",
                        part.name
                    )));
                }
                params.insert("filename".into(), json!(filename));
                return Ok(Some(UploadFile {
                    name: filename,
                    data: part.data,
                }));
            }
            None => {
                params.insert(part.name, json!(String::from_utf8_lossy(&part.data).into_owned()));
            }
        }
    }
    Ok(None)
}

/// Image volumes derived from VM configs on a storage as seen from `node`.
fn image_volumes(c: &Cluster, node: &str, st: &Storage) -> Vec<(String, u64, u32)> {
    let mut out = Vec::new();
    for vm in c.vms.values() {
        if !st.shared && vm.node != node {
            continue;
        }
        // Pending values count too: PVE allocates a new disk before it is applied.
        let mut seen = std::collections::BTreeSet::new();
        for (k, v) in vm.config.iter().chain(&vm.pending) {
            if !crate::validate::is_disk_key(k) && propstr::family(k) != Some("unused") {
                continue;
            }
            let m = propstr::to_map(v, Some("file"));
            let Some(file) = m.get("file") else { continue };
            if file.starts_with(&format!("{}:", st.name))
                && !file.contains(":iso/")
                && seen.insert(file.clone())
            {
                let size = m
                    .get("size")
                    .and_then(|s| propstr::parse_size(s))
                    .unwrap_or(4 << 20);
                out.push((file.clone(), size, vm.vmid));
            }
        }
    }
    out
}

/// Bytes used on a storage.
pub fn used_bytes(c: &Cluster, node: &str, st: &Storage) -> u64 {
    let files: u64 = c
        .volumes_of(node, st)
        .map(|m| m.values().map(|v| v.data.len() as u64).sum())
        .unwrap_or(0);
    files + image_volumes(c, node, st).iter().map(|(_, s, _)| s).sum::<u64>()
}

fn storage_json(c: &Cluster, node: &str, s: &Storage) -> Value {
    let used = used_bytes(c, node, s).min(s.total);
    json!({
        "storage": s.name,
        "type": s.kind,
        "content": s.content.join(","),
        "active": 1,
        "enabled": 1,
        "shared": if s.shared { 1 } else { 0 },
        "total": s.total,
        "used": used,
        "avail": s.total - used,
        "used_fraction": used as f64 / s.total.max(1) as f64,
    })
}

/// `GET /nodes/{node}/storage`.
pub fn list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let content = p.str("content");
    let only = p.str("storage");
    ctx.state.with(|c| {
        let items = c
            .storages
            .iter()
            .filter(|s| s.nodes.contains(&node))
            .filter(|s| only.as_ref().is_none_or(|o| &s.name == o))
            .filter(|s| {
                c.can(
                    &ctx.user,
                    &format!("/storage/{}", s.name),
                    &["Datastore.Audit", "Datastore.AllocateSpace"],
                    true,
                )
            })
            .filter(|s| {
                content
                    .as_ref()
                    .is_none_or(|ct| ct.split(',').any(|x| s.allows(x)))
            })
            .map(|s| storage_json(c, &node, s))
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

fn storage<'a>(c: &'a Cluster, node: &str, name: &str) -> Result<&'a Storage, ApiError> {
    c.storage_on(node, name)
        .ok_or_else(|| ApiError::server(format!("storage '{name}' does not exist")))
}

/// `GET /nodes/{node}/storage/{storage}/status`.
pub fn status(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    ctx.state.with(|c| {
        let s = storage(c, &node, &name)?;
        Ok(Reply::data(storage_json(c, &node, s)))
    })
}

fn volume_json(v: &Volume) -> Value {
    json!({"volid": v.volid, "content": v.content, "format": v.format, "size": v.data.len(), "ctime": v.ctime})
}

/// `GET /nodes/{node}/storage/{storage}/content`.
pub fn content_list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    let content = p.str("content");
    let vmid = p.int("vmid");
    ctx.state.with(|c| {
        let s = storage(c, &node, &name)?;
        let mut items = Vec::new();
        if vmid.is_none()
            && let Some(vols) = c.volumes_of(&node, s)
        {
            items.extend(vols.values().filter(|v| content.as_ref().is_none_or(|ct| &v.content == ct)).map(volume_json));
        }
        items.retain(|v| {
            let id = v["volid"].as_str().unwrap_or_default();
            c.check_volume_access(&ctx.user, None, id).is_ok()
        });
        if content.as_ref().is_none_or(|ct| ct == "images") {
            for (volid, size, owner) in image_volumes(c, &node, s) {
                if c.check_volume_access(&ctx.user, None, &volid).is_err() {
                    continue;
                }
                if vmid.is_some_and(|v| v != i64::from(owner)) {
                    continue;
                }
                items.push(json!({"volid": volid, "content": "images", "format": "raw", "size": size, "used": size, "vmid": owner}));
            }
        }
        Ok(Reply::data(Value::Array(items)))
    })
}

/// Full volid from the `volume` path parameter (accepts `storage:path` or `path`).
fn full_volid(storage: &str, volume: &str) -> String {
    if volume.contains(':') {
        volume.to_string()
    } else {
        format!("{storage}:{volume}")
    }
}

/// `GET /nodes/{node}/storage/{storage}/content/{volume}`.
pub fn content_get(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    let volid = full_volid(&name, &p.str("volume").unwrap_or_default());
    ctx.state.with(|c| {
        c.check_volume_access(&ctx.user, None, &volid)?;
        let s = storage(c, &node, &name)?;
        if let Some(v) = c.volumes_of(&node, s).and_then(|m| m.get(&volid)) {
            let rel = volid.split_once(':').map(|(_, r)| r).unwrap_or("");
            // PVE's `local` dir storage lives in /var/lib/vz; other file storages are mounted under /mnt/pve.
            let root = if s.name == "local" {
                "/var/lib/vz".to_string()
            } else {
                format!("/mnt/pve/{}", s.name)
            };
            let path = format!("{root}/template/{rel}");
            return Ok(Reply::data(
                json!({"path": path, "size": v.data.len(), "used": v.data.len(), "format": v.format}),
            ));
        }
        if let Some((_, size, _)) = image_volumes(c, &node, s)
            .into_iter()
            .find(|(id, _, _)| *id == volid)
        {
            let rel = volid.split_once(':').map(|(_, r)| r).unwrap_or("");
            return Ok(Reply::data(
                json!({"path": format!("/dev/pve/{rel}"), "size": size, "used": size, "format": "raw"}),
            ));
        }
        Err(ApiError::server(format!("volume '{volid}' does not exist")))
    })
}

/// `DELETE /nodes/{node}/storage/{storage}/content/{volume}` (`imgdel` task, or null with `delay`).
pub fn content_delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    let volid = full_volid(&name, &p.str("volume").unwrap_or_default());
    let delay = p.has("delay");
    ctx.state.with(|c| {
        let storeid = volid.split_once(':').map_or(name.as_str(), |(s, _)| s);
        c.check(&ctx.user, &format!("/storage/{storeid}"), &["Datastore.Allocate"])?;
        let s = storage(c, &node, &name)?.clone();
        let key = (s.scope(&node), s.name.clone());
        if !c.volumes.get(&key).is_some_and(|m| m.contains_key(&volid)) {
            if image_volumes(c, &node, &s).iter().any(|(id, _, _)| *id == volid) {
                return Err(ApiError::server(format!(
                    "unable to delete '{volid}' - volume is in use by a VM"
                )));
            }
            return Err(ApiError::server(format!("volume '{volid}' does not exist")));
        }
        if delay {
            if let Some(m) = c.volumes.get_mut(&key) {
                m.remove(&volid);
            }
            return Ok(Reply::data(Value::Null));
        }
        let spec = TaskSpec {
            node: node.clone(),
            kind: "imgdel",
            id: volid.clone(),
            user: ctx.user.clone(),
            latency_key: "imgdel".into(),
            log: Vec::new(),
        };
        let upid = tasks::start(
            &ctx.state,
            c,
            spec,
            Box::new(move |c: &mut Cluster| {
                c.volumes
                    .get_mut(&key)
                    .and_then(|m| m.remove(&volid))
                    .map(|_| Vec::new())
                    .ok_or_else(|| format!("volume '{volid}' does not exist"))
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// Normalises an upload file name: strip the path, replace characters outside `[a-zA-Z0-9_.-]`.
pub fn normalise_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `POST /nodes/{node}/storage/{storage}/upload` (`imgcopy` task; the file exists once it ends OK).
pub fn upload(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    let content = p.str("content").unwrap_or_default();
    let Some(file) = ctx.upload.clone() else {
        return Err(ApiError::param(
            "filename",
            "property is missing and it is not optional",
        ));
    };
    let filename = normalise_name(&file.name);
    let lower = filename.to_ascii_lowercase();
    let (dir, format) = match content.as_str() {
        "iso" if lower.ends_with(".iso") || lower.ends_with(".img") => ("iso", "iso"),
        "vztmpl"
            if lower.ends_with(".tar.gz") || lower.ends_with(".tar.xz") || lower.ends_with(".tar.zst") =>
        {
            ("vztmpl", "tgz")
        }
        "import"
            if [".ova", ".qcow2", ".raw", ".vmdk", ".img"]
                .iter()
                .any(|e| lower.ends_with(e)) =>
        {
            ("import", "raw")
        }
        _ => return Err(ApiError::param("filename", "wrong file extension")),
    };
    ctx.state.with(|c| {
        let s = storage(c, &node, &name)?.clone();
        if !s.allows(&content) {
            return Err(ApiError::server(format!(
                "storage '{name}' does not support '{content}' content"
            )));
        }
        let volid = format!("{name}:{dir}/{filename}");
        let key = (s.scope(&node), s.name.clone());
        let spec = TaskSpec {
            node: node.clone(),
            kind: "imgcopy",
            id: String::new(),
            user: ctx.user.clone(),
            latency_key: "imgcopy".into(),
            log: vec![format!(
                "starting file import from: /var/tmp/pveupload-{:x}",
                crate::state::fnv64(filename.as_bytes())
            )],
        };
        let content = content.clone();
        let upid = tasks::start(
            &ctx.state,
            c,
            spec,
            Box::new(move |c: &mut Cluster| {
                let size = file.data.len();
                c.volumes.entry(key).or_default().insert(
                    volid.clone(),
                    Volume {
                        volid: volid.clone(),
                        content,
                        format: format.to_string(),
                        data: file.data,
                        ctime: now_epoch(),
                    },
                );
                Ok(vec![
                    format!("target file: {volid}"),
                    format!("file size is: {size}"),
                    "finished file import successfully".into(),
                ])
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}
