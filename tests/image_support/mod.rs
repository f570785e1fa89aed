//! Harness for the ProxmoxVMImage tests: the VM harness (control plane, pve-sim, the
//! ProxmoxVirtualMachine controller) plus the ProxmoxVMImage CRD and controller, a pve-sim whose
//! `local` storage takes `import` content, and a loopback file server serving the image.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use capmox_api::vm::{ImagePhase, ProxmoxVMImage};
use kube::api::{Api, PostParams};
use pve_sim::fileserver::{FileServer, qcow2_image};
use serde_json::{Value, json};

use crate::vm_support::{Harness, NS};

/// The image every test serves: a small qcow2 file of 2 GiB virtual size.
pub fn image_bytes() -> Vec<u8> {
    qcow2_image(2 << 30, 8192)
}

/// Hex SHA-256.
pub fn sha256(data: &[u8]) -> String {
    use std::fmt::Write;
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The simulator's configuration: the default scenario with `import` content on `local`.
pub fn sim_config() -> pve_sim::SimConfig {
    let mut scenario = pve_sim::Scenario::default();
    for s in &mut scenario.storages {
        if s.name == "local" {
            s.content = "iso,vztmpl,backup,import".into();
        }
    }
    pve_sim::SimConfig {
        scenario,
        ..pve_sim::SimConfig::default()
    }
}

/// The VM harness, the image controller and the file server.
pub struct ImageHarness {
    pub h: Harness,
    pub files: FileServer,
    images: Option<tokio::task::JoinHandle<()>>,
}

impl ImageHarness {
    pub async fn start(settings: capmox::vm::Settings) -> Self {
        let h = Harness::start_with(sim_config(), settings).await;
        h.env
            .install_crds(vec![capmox_api::crd::proxmox_vm_images().unwrap()])
            .await
            .unwrap();
        let files = FileServer::start().await.unwrap();
        files.put("noble.qcow2", image_bytes());
        let mut ih = Self {
            h,
            files,
            images: None,
        };
        ih.start_images();
        ih
    }

    /// Starts the image controller (again) with a fresh context.
    pub fn start_images(&mut self) {
        if self.images.is_none() {
            let ctx = self.h.context();
            self.images = Some(tokio::spawn(capmox::controllers::vm_image::run(
                ctx,
                std::future::pending::<()>(),
            )));
        }
    }

    /// Kills the image controller (a crash).
    pub async fn kill_images(&mut self) {
        if let Some(t) = self.images.take() {
            t.abort();
            let _ = t.await;
        }
    }

    pub async fn stop(mut self) {
        self.kill_images().await;
        self.h.stop().await;
    }

    pub fn images(&self) -> Api<ProxmoxVMImage> {
        Api::namespaced(self.h.client.clone(), NS)
    }

    /// The spec of an image of the served file on `pve1`'s `local` storage.
    pub fn spec(&self) -> Value {
        json!({
            "url": self.files.url("noble.qcow2"), "node": "pve1", "storage": "local",
            "checksum": sha256(&image_bytes()), "checksumAlgorithm": "sha256",
            "templateName": "noble-tmpl",
            "hardware": {"diskStorage": "local-lvm", "memoryMiB": 1024, "numCores": 2}
        })
    }

    /// Creates image `name` (`Err`: the API server's refusal).
    pub async fn create(&self, name: &str, spec: Value) -> Result<ProxmoxVMImage, kube::Error> {
        let obj: ProxmoxVMImage = serde_json::from_value(json!({
            "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::IMAGE_KIND,
            "metadata": {"name": name, "namespace": NS}, "spec": spec
        }))
        .unwrap();
        self.images().create(&PostParams::default(), &obj).await
    }

    /// Waits until image `name` satisfies `pred`.
    pub async fn wait(
        &self,
        name: &str,
        secs: u64,
        what: &str,
        pred: impl Fn(&ProxmoxVMImage) -> bool,
    ) -> ProxmoxVMImage {
        let api = self.images();
        let last = std::sync::Mutex::new(None::<ProxmoxVMImage>);
        testenv::wait::wait_for_explained(
            secs,
            Duration::from_millis(50),
            &format!("image {name}: {what}"),
            || async {
                let p = api.get_opt(name).await.ok().flatten()?;
                let ok = pred(&p);
                *last.lock().unwrap() = Some(p.clone());
                ok.then_some(p)
            },
            || async { format!("status: {:?}", last.lock().unwrap().as_ref().map(|p| &p.status)) },
        )
        .await
    }

    pub async fn wait_phase(&self, name: &str, phase: ImagePhase, secs: u64) -> ProxmoxVMImage {
        self.wait(name, secs, &format!("phase {phase:?}"), |p| {
            p.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    pub async fn wait_gone(&self, name: &str, secs: u64) {
        let api = self.images();
        testenv::wait::wait_for(secs, &format!("image {name} to be gone"), || async {
            api.get_opt(name).await.ok().flatten().is_none().then_some(())
        })
        .await;
    }

    /// VMIDs of the templates named `name` in the simulator.
    pub fn templates_named(&self, name: &str) -> Vec<u32> {
        self.h.sim.state().with(|c| {
            c.vms
                .values()
                .filter(|v| v.is_template() && v.config.get("name").map(String::as_str) == Some(name))
                .map(|v| v.vmid)
                .collect()
        })
    }

    /// The `import` files in the simulator.
    pub fn import_files(&self) -> Vec<String> {
        self.h
            .sim
            .state()
            .file_volumes()
            .into_iter()
            .filter(|v| v.content == "import")
            .map(|v| v.volid)
            .collect()
    }
}

/// The `Ready` condition's reason and message of an image.
pub fn ready(img: &ProxmoxVMImage) -> Option<(String, String, String)> {
    img.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}
