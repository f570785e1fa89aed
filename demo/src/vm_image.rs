//! The VM demo's image: a small qcow2 disk image generated here and served on loopback, made a
//! template by a ProxmoxVMImage (Proxmox downloads it with `download-url`, a VM imports it with
//! `import-from` and becomes the template), a ProxmoxVirtualMachine cloned from it through
//! `spec.imageRef` and running, then both deleted (the template goes with its image).

use std::io::Write;
use std::time::{Duration, Instant};

use capmox_api::vm::{ImagePhase, ProxmoxVMImage, ProxmoxVirtualMachine, VmPhase};
use kube::api::Api;
use pve_sim::fileserver::{FileServer, qcow2_image};
use serde_json::json;

use crate::DemoError;
use crate::progress::Printer;
use crate::vm_ops::{create, kube_err, object, until};

/// The served file's name.
const FILE: &str = "demo-noble.qcow2";
/// The image's (and its template's) name.
const IMAGE: &str = "demo-noble";
/// The VM made from it.
const VM: &str = "demo-web";

/// Serves a generated disk image on loopback, imports it as a template and runs a VM from it;
/// deletes both again.
pub async fn image_to_vm<W: Write>(
    p: &mut Printer<W>,
    client: &kube::Client,
    sim: &pve_sim::SimServer,
    ns: &str,
) -> Result<(), DemoError> {
    let limit = Duration::from_secs(120);
    let files = FileServer::start().await.map_err(|source| DemoError::Io {
        action: "starting the loopback file server".into(),
        source,
    })?;
    // A qcow2 header of a 2 GiB disk, padded to 64 KiB: all the simulator reads of it.
    let data = qcow2_image(2 << 30, 64 << 10);
    let url = files.url(FILE);
    p.line(format!(
        "serving {FILE} ({} KiB, a 2 GiB qcow2 disk) at {url}",
        data.len() >> 10
    ))?;
    files.put(FILE, data);
    let spec = json!({"url": url, "node": "pve1", "storage": "local", "templateName": IMAGE,
        "hardware": {"diskStorage": "local-lvm", "memoryMiB": 1024, "numCores": 1}});
    p.line(format!(
        "creating ProxmoxVMImage {ns}/{IMAGE} (Proxmox downloads the file, imports it, makes a template)"
    ))?;
    create::<ProxmoxVMImage>(client, ns, object(capmox_api::vm::IMAGE_KIND, IMAGE, ns, spec)).await?;
    let images: Api<ProxmoxVMImage> = Api::namespaced(client.clone(), ns);
    let img = until(&images, IMAGE, "the image's template", limit, |i| {
        i.status.as_ref().and_then(|s| s.phase) == Some(ImagePhase::Ready)
    })
    .await?;
    let status = img.status.unwrap_or_default();
    let template = status.template_vmid.unwrap_or_default();
    p.line(format!(
        "{IMAGE}: Ready, template VMID {template} on {}",
        status.node.unwrap_or_default()
    ))?;
    let spec = json!({"imageRef": {"name": IMAGE}, "memoryMiB": 1024,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
            "ipv4Addresses": ["10.40.0.20/24"], "gateway": "10.40.0.1"}]},
        "cloudInit": {"userData": "#cloud-config\npackages: [nginx]\n"}});
    p.line(format!(
        "creating ProxmoxVirtualMachine {ns}/{VM} from the image (spec.imageRef)"
    ))?;
    create::<ProxmoxVirtualMachine>(client, ns, object(capmox_api::vm::KIND, VM, ns, spec)).await?;
    let pvms: Api<ProxmoxVirtualMachine> = Api::namespaced(client.clone(), ns);
    let vm = until(&pvms, VM, "the image's VM running", limit, |o| {
        o.status.as_ref().is_some_and(|s| {
            s.phase == Some(VmPhase::Running) && s.ip_addresses.as_ref().is_some_and(|i| !i.is_empty())
        })
    })
    .await?;
    let s = vm.status.unwrap_or_default();
    p.line(format!(
        "{VM}: Running, VMID {} on {} cloned from template {template}, address {}",
        s.vmid.unwrap_or_default(),
        s.node.unwrap_or_default(),
        s.ip_addresses.unwrap_or_default().join(", ")
    ))?;
    pvms.delete(VM, &Default::default())
        .await
        .map_err(kube_err(format!("deleting {VM}")))?;
    images
        .delete(IMAGE, &Default::default())
        .await
        .map_err(kube_err(format!("deleting {IMAGE}")))?;
    let deadline = Instant::now() + limit;
    loop {
        let vm_left = pvms
            .get_opt(VM)
            .await
            .map_err(kube_err(format!("reading {VM}")))?
            .is_some();
        let image_left = images
            .get_opt(IMAGE)
            .await
            .map_err(kube_err(format!("reading {IMAGE}")))?
            .is_some();
        if !vm_left && !image_left {
            break;
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step: "the image's and its VM's deletion",
                after: limit,
                detail: format!("VM left: {vm_left}, image left: {image_left}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let template_left = u32::try_from(template)
        .ok()
        .and_then(|id| sim.state().vm(id))
        .is_some();
    p.line(if template_left {
        format!("deleted {VM} and {IMAGE}, but template {template} is still there")
    } else {
        format!("deleted {VM} and {IMAGE} (its template with it)")
    })?;
    Ok(())
}
