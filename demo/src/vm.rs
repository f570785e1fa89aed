//! `make demo-vm`: one standalone VM (a ProxmoxVirtualMachine, no Cluster API) on the simulated
//! Proxmox VE — created and running with its guest's address, paused, resumed, given more memory
//! (hot-plugged) and a larger disk (grown online), snapshotted, changed, restored and cloned
//! ([`crate::vm_ops`]), then deleted with nothing left behind; on the way a disk image the demo
//! serves itself on loopback becomes a template and a second VM runs from it
//! ([`crate::vm_image`]).

use std::io::Write;
use std::time::{Duration, Instant};

use capmox::context::ControllerSettings;
use capmox::manager::{Manager, ManagerOptions};
use capmox_api::vm::{ProxmoxVirtualMachine, VmPhase};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{TestEnv, TestEnvOptions};

use crate::progress::Printer;
use crate::{DemoError, SCENARIO};

const NS: &str = "demo-vms";
const NAME: &str = "demo-db";

/// What the VM demo observed.
#[derive(Debug, Clone, Default)]
pub struct VmDemoReport {
    /// The VM's VMID, node and first address once running.
    pub vmid: Option<i64>,
    /// Its node.
    pub node: Option<String>,
    /// Its addresses.
    pub ips: Vec<String>,
    /// Non-template VMs left in the simulator after the deletion.
    pub vms_left: Vec<String>,
    /// ISO volumes left on the simulator's storages after the deletion.
    pub isos_left: Vec<String>,
    /// Time of the whole demo.
    pub total: Duration,
}

impl VmDemoReport {
    /// Whether nothing was left on Proxmox after the deletion.
    pub fn clean(&self) -> bool {
        self.vms_left.is_empty() && self.isos_left.is_empty()
    }
}

fn phase(p: &ProxmoxVirtualMachine) -> Option<VmPhase> {
    p.status.as_ref().and_then(|s| s.phase)
}

/// Waits (printing each phase change) until `done` holds, for at most `limit`.
async fn until<W: Write>(
    p: &mut Printer<W>,
    api: &Api<ProxmoxVirtualMachine>,
    last: &mut Option<VmPhase>,
    step: &'static str,
    limit: Duration,
    done: impl Fn(&ProxmoxVirtualMachine) -> bool,
) -> Result<ProxmoxVirtualMachine, DemoError> {
    let deadline = Instant::now() + limit;
    loop {
        let obj = api.get_opt(NAME).await.map_err(|source| DemoError::Kube {
            action: format!("reading {NAME}"),
            source,
        })?;
        if let Some(o) = &obj {
            let now = phase(o);
            if now != *last {
                p.line(format!("{NAME}: {}", now.map_or("-", VmPhase::as_str)))?;
                *last = now;
            }
            if done(o) {
                return Ok(o.clone());
            }
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step,
                after: limit,
                detail: format!("{:?}", obj.and_then(|o| o.status)),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn patch(api: &Api<ProxmoxVirtualMachine>, body: serde_json::Value) -> Result<(), DemoError> {
    api.patch(NAME, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(|_| ())
        .map_err(|source| DemoError::Kube {
            action: format!("patching {NAME}"),
            source,
        })
}

/// Runs the VM demo, writing progress to `out`.
pub async fn run_vm(instant: bool, out: impl Write) -> Result<VmDemoReport, DemoError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut p = Printer::new(out);
    let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO)?;
    if instant {
        scenario.latency = pve_sim::LatencySpec::default();
    }
    // `local` takes `import` content: the image demo's download lands there.
    for s in scenario.storages.iter_mut().filter(|s| s.name == "local") {
        s.content.push_str(",import");
    }
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario,
        ..pve_sim::SimConfig::default()
    })
    .await?;
    p.line(format!("pve-sim: Proxmox VE simulator at {}", sim.url()))?;
    let env = TestEnv::start_with(TestEnvOptions {
        force_in_tree: true,
        ..TestEnvOptions::default()
    })
    .await?;
    let client = env.client();
    env.install_crds(capmox_api::crd::generated().map_err(|e| DemoError::Crd(e.to_string()))?)
        .await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(|source| DemoError::Kube {
            action: "creating the namespace".into(),
            source,
        })?;
    p.line(format!(
        "control plane: in-tree Kubernetes API (kubectl --kubeconfig {} get pvm -n {NS})",
        env.kubeconfig_path().display()
    ))?;
    let proxmox = capmox::proxmox::ClientConfig::new(
        sim.url(),
        capmox::proxmox::Credentials::token(sim.token_id(), sim.token_secret()),
    );
    let proxmox = match sim.ca_pem() {
        Some(pem) => proxmox.with_ca_pem(pem),
        None => proxmox,
    };
    let manager = Manager::new(
        client.clone(),
        ManagerOptions {
            proxmox: Some(proxmox),
            settings: ControllerSettings {
                concurrency: 4,
                ..ControllerSettings::default()
            },
            crd_wait_timeout: Duration::from_secs(30),
            ..ManagerOptions::default()
        },
    )
    .await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    let result = steps(&mut p, &client, &sim).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(15), manager).await;
    sim.shutdown().await;
    drop(env);
    result
}

async fn steps<W: Write>(
    p: &mut Printer<W>,
    client: &kube::Client,
    sim: &pve_sim::SimServer,
) -> Result<VmDemoReport, DemoError> {
    let api: Api<ProxmoxVirtualMachine> = Api::namespaced(client.clone(), NS);
    let vm: ProxmoxVirtualMachine = serde_json::from_value(json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048, "numCores": 2,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
                "ipv4Addresses": ["10.40.0.10/24"], "gateway": "10.40.0.1", "dnsServers": ["10.40.0.1"]}]},
            "cloudInit": {"userData": "#cloud-config\npackages: [postgresql]\n"}
        }
    }))?;
    p.line(format!(
        "creating ProxmoxVirtualMachine {NS}/{NAME} (template 100, 2 cores, 2048 MiB, 20 GiB)"
    ))?;
    api.create(&PostParams::default(), &vm)
        .await
        .map_err(|source| DemoError::Kube {
            action: format!("creating {NAME}"),
            source,
        })?;
    let limit = Duration::from_secs(120);
    let mut last = None;
    let running = |o: &ProxmoxVirtualMachine| {
        phase(o) == Some(VmPhase::Running)
            && o.status
                .as_ref()
                .and_then(|s| s.ip_addresses.as_ref())
                .is_some_and(|i| !i.is_empty())
    };
    let o = until(
        p,
        &api,
        &mut last,
        "the VM running with its address",
        limit,
        running,
    )
    .await?;
    let s = o.status.unwrap_or_default();
    let mut report = VmDemoReport {
        vmid: s.vmid,
        node: s.node.clone(),
        ips: s.ip_addresses.clone().unwrap_or_default(),
        ..VmDemoReport::default()
    };
    p.line(format!(
        "{NAME}: VMID {} on {}, address {}, console {}",
        s.vmid.unwrap_or_default(),
        s.node.unwrap_or_default(),
        report.ips.join(", "),
        s.console_url.unwrap_or_default()
    ))?;
    p.line("pausing (spec.paused: true)")?;
    patch(&api, json!({"spec": {"paused": true}})).await?;
    until(p, &api, &mut last, "the VM paused", limit, |o| {
        phase(o) == Some(VmPhase::Paused)
    })
    .await?;
    p.line("resuming (spec.paused: false)")?;
    patch(&api, json!({"spec": {"paused": false}})).await?;
    until(p, &api, &mut last, "the VM resumed", limit, running).await?;
    p.line("resizing: 4096 MiB (hot-plugged) and a 30 GiB disk (grown online)")?;
    patch(
        &api,
        json!({"spec": {"memoryMiB": 4096, "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 30}}}}),
    )
    .await?;
    let vmid = report
        .vmid
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or_default();
    let deadline = Instant::now() + limit;
    loop {
        let resized = sim.state().with(|c| {
            c.vms.get(&vmid).is_some_and(|v| {
                v.is_running()
                    && v.pending.is_empty()
                    && v.config.get("memory").is_some_and(|m| m == "4096")
                    && v.config.get("scsi0").is_some_and(|d| d.contains("size=30G"))
            })
        });
        if resized {
            break;
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step: "the resize",
                after: limit,
                detail: format!("{:?}", sim.state().vm(vmid).map(|v| v.config)),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p.line(format!("{NAME}: 4096 MiB and 30 GiB applied live, still running"))?;
    crate::vm_ops::snapshot_restore_clone(p, client, sim, (NS, NAME, vmid)).await?;
    crate::vm_image::image_to_vm(p, client, sim, NS).await?;
    p.line(format!("deleting {NS}/{NAME}"))?;
    api.delete(NAME, &Default::default())
        .await
        .map_err(|source| DemoError::Kube {
            action: format!("deleting {NAME}"),
            source,
        })?;
    let deadline = Instant::now() + limit;
    while api
        .get_opt(NAME)
        .await
        .map_err(|source| DemoError::Kube {
            action: format!("reading {NAME}"),
            source,
        })?
        .is_some()
    {
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step: "the deletion",
                after: limit,
                detail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (report.vms_left, report.isos_left) = crate::report::proxmox_leaks(sim);
    report.total = p.start().elapsed();
    p.line(if report.clean() {
        "deleted: no VM, no ISO left".to_owned()
    } else {
        format!(
            "left behind: VMs {:?}, ISOs {:?}",
            report.vms_left, report.isos_left
        )
    })?;
    Ok(report)
}
