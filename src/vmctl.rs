//! `capmox vm start|stop|restart|pause|unpause|console NAME [-n NS]`: virtctl's verbs for
//! ProxmoxVirtualMachines, done by editing the object as its controller reads it (installed as
//! `kubectl-pvm`, the binary is the kubectl plugin `kubectl pvm …`):
//!
//! * `start`: `runStrategy: Halted` becomes `Always`; a `Manual` (or a `RerunOnFailure` VM that
//!   stays stopped) gets the one-shot request `vm.capmox-rs.io/powerRequest: start@<now>`;
//! * `stop`: `Always` and `RerunOnFailure` become `Halted`; `Manual` gets `stop@<now>`;
//! * `restart`: `vm.capmox-rs.io/restartedAt: <now>` (one reboot);
//! * `pause` / `unpause`: `spec.paused`;
//! * `console`: prints the Proxmox web console URL of the VM;
//! * `snapshot NAME [--memory] [--description …]`, `restore NAME SNAPSHOT`,
//!   `clone SOURCE TARGET [--linked]`: create a ProxmoxVMSnapshot, ProxmoxVMRestore or
//!   ProxmoxVMClone (named after the VM and the time, or after the target).

use capmox_api::vm::{
    GROUP, KIND, PLURAL, POWER_REQUEST_ANNOTATION, ProxmoxVirtualMachine, RESTARTED_AT_ANNOTATION,
    RunStrategy, VERSION,
};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// `capmox vm …`.
#[derive(Debug, Clone, clap::Args)]
pub struct VmArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: VmAction,
    /// Namespace of the ProxmoxVirtualMachine (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

/// The verbs.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum VmAction {
    /// Start the VM (and keep it running).
    Start {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Stop the VM (shut down; hard stop after `spec.shutdownTimeout`).
    Stop {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Restart the VM once (a guest reboot with the agent, else stop and start).
    Restart {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Pause the running VM (QEMU pause).
    Pause {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Resume the paused VM.
    Unpause {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Print the Proxmox web console URL of the VM.
    Console {
        /// The ProxmoxVirtualMachine.
        name: String,
    },
    /// Take a snapshot of the VM (a ProxmoxVMSnapshot named `NAME-<time>`).
    Snapshot {
        /// The ProxmoxVirtualMachine.
        name: String,
        /// Include the running VM's memory (a restore resumes it where it was).
        #[arg(long)]
        memory: bool,
        /// Description of the snapshot.
        #[arg(long)]
        description: Option<String>,
    },
    /// Roll the VM back to one of its ProxmoxVMSnapshots (a ProxmoxVMRestore).
    Restore {
        /// The ProxmoxVirtualMachine.
        name: String,
        /// The ProxmoxVMSnapshot.
        snapshot: String,
    },
    /// Make a new ProxmoxVirtualMachine TARGET from SOURCE (a ProxmoxVMClone named TARGET).
    Clone {
        /// The ProxmoxVirtualMachine to clone.
        source: String,
        /// Name of the new ProxmoxVirtualMachine.
        target: String,
        /// A linked clone of the source's template (default: a full copy of the source's disks).
        #[arg(long)]
        linked: bool,
    },
}

/// Why a verb could not be done.
#[derive(Debug, thiserror::Error)]
pub enum VmCtlError {
    /// The CRD is not served.
    #[error(
        "the ProxmoxVirtualMachine kind ({PLURAL}.{GROUP}) is not installed in this cluster: apply config/crd/bases/vm.capmox-rs.io_proxmoxvirtualmachines.yaml or the release's components"
    )]
    NoCrd,
    /// The object does not exist.
    #[error("ProxmoxVirtualMachine {namespace}/{name} not found")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The VM has no console (yet).
    #[error("ProxmoxVirtualMachine {0} has no console URL yet: it has no VMID and node")]
    NoConsole(String),
    /// Reading the kubeconfig failed.
    #[error("reading the kubeconfig: {0}")]
    Config(String),
    /// A Kubernetes request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The error.
        #[source]
        source: Box<kube::Error>,
    },
}

impl VmAction {
    fn name(&self) -> &str {
        match self {
            Self::Start { name }
            | Self::Stop { name }
            | Self::Restart { name }
            | Self::Pause { name }
            | Self::Unpause { name }
            | Self::Console { name }
            | Self::Snapshot { name, .. }
            | Self::Restore { name, .. } => name,
            Self::Clone { source, .. } => source,
        }
    }
}

fn kube(action: String) -> impl FnOnce(kube::Error) -> VmCtlError {
    move |e| VmCtlError::Kube {
        action,
        source: Box::new(e),
    }
}

/// The current time in RFC 3339 (what `kubectl rollout restart` writes).
fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// The patch `action` makes to `pvm`, and what it says (`None` patch: nothing to change).
pub fn plan(
    action: &VmAction,
    pvm: &ProxmoxVirtualMachine,
    now: &str,
) -> (Option<serde_json::Value>, String) {
    let id = format!(
        "{}/{}",
        pvm.metadata.namespace.as_deref().unwrap_or_default(),
        pvm.metadata.name.as_deref().unwrap_or_default()
    );
    let strategy = pvm.spec.run_strategy();
    let request = |verb: &str| json!({"metadata": {"annotations": {POWER_REQUEST_ANNOTATION: format!("{verb}@{now}")}}});
    match action {
        VmAction::Start { .. } => match strategy {
            RunStrategy::Halted => (
                Some(json!({"spec": {"runStrategy": "Always"}})),
                format!("{id} will be started (runStrategy: Always)"),
            ),
            RunStrategy::Always => (None, format!("{id} is already set to run (runStrategy: Always)")),
            RunStrategy::Manual | RunStrategy::RerunOnFailure => {
                (Some(request("start")), format!("{id} will be started"))
            }
        },
        VmAction::Stop { .. } => match strategy {
            RunStrategy::Always | RunStrategy::RerunOnFailure => (
                Some(json!({"spec": {"runStrategy": "Halted"}})),
                format!("{id} will be stopped (runStrategy: Halted)"),
            ),
            RunStrategy::Halted => (None, format!("{id} is already set to stop (runStrategy: Halted)")),
            RunStrategy::Manual => (Some(request("stop")), format!("{id} will be stopped")),
        },
        VmAction::Restart { .. } => (
            Some(json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}})),
            format!("{id} will be restarted"),
        ),
        VmAction::Pause { .. } => (
            Some(json!({"spec": {"paused": true}})),
            format!("{id} will be paused"),
        ),
        VmAction::Unpause { .. } => (
            Some(json!({"spec": {"paused": false}})),
            format!("{id} will be resumed"),
        ),
        VmAction::Console { .. }
        | VmAction::Snapshot { .. }
        | VmAction::Restore { .. }
        | VmAction::Clone { .. } => (None, String::new()),
    }
}

/// The object a `snapshot`, `restore` or `clone` verb creates (`None`: another verb), with its
/// kind and plural; `stamp` names it (`YYYYmmddHHMMSS`).
pub fn operation_object(
    action: &VmAction,
    namespace: &str,
    stamp: &str,
) -> Option<(serde_json::Value, &'static str)> {
    let object = |kind: &str, name: String, spec: serde_json::Value| {
        json!({"apiVersion": capmox_api::vm::API_VERSION, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    };
    Some(match action {
        VmAction::Snapshot {
            name,
            memory,
            description,
        } => {
            let mut spec = json!({"source": {"name": name}});
            if *memory {
                spec["includeMemory"] = json!(true);
            }
            if let Some(d) = description {
                spec["description"] = json!(d);
            }
            (
                object("ProxmoxVMSnapshot", format!("{name}-{stamp}"), spec),
                "proxmoxvmsnapshots",
            )
        }
        VmAction::Restore { name, snapshot } => (
            object(
                "ProxmoxVMRestore",
                format!("{name}-{stamp}"),
                json!({"target": {"name": name}, "snapshotName": snapshot}),
            ),
            "proxmoxvmrestores",
        ),
        VmAction::Clone {
            source,
            target,
            linked,
        } => {
            let mut spec = json!({"source": {"name": source}, "target": {"name": target}});
            if *linked {
                spec["linked"] = json!(true);
            }
            (object("ProxmoxVMClone", target.clone(), spec), "proxmoxvmclones")
        }
        _ => return None,
    })
}

/// Creates the object of a `snapshot`, `restore` or `clone` verb; returns what to print.
async fn create_operation(
    client: kube::Client,
    object: serde_json::Value,
    plural: &str,
    ns: &str,
) -> Result<String, VmCtlError> {
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let gvk = kube::api::GroupVersionKind::gvk(GROUP, VERSION, &kind);
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, ns, &ar);
    let obj: kube::api::DynamicObject = serde_json::from_value(object)
        .map_err(|e| VmCtlError::Config(format!("building the {kind}: {e}")))?;
    let params = kube::api::PostParams {
        field_manager: Some("capmox-vm".into()),
        ..Default::default()
    };
    api.create(&params, &obj)
        .await
        .map_err(kube(format!("creating {kind} {ns}/{name}")))?;
    Ok(format!(
        "{kind} {ns}/{name} created (kubectl get -n {ns} {plural}/{name} -w)"
    ))
}

/// Runs `args` with `client`, in `default_ns` unless `-n` says otherwise; returns what to print.
pub async fn run(args: &VmArgs, client: kube::Client, default_ns: &str) -> Result<String, VmCtlError> {
    let ns = args.namespace.as_deref().unwrap_or(default_ns);
    let served = client
        .list_api_groups()
        .await
        .map_err(kube("reading the API groups".into()))?
        .groups
        .iter()
        .any(|g| g.name == GROUP && g.versions.iter().any(|v| v.version == VERSION));
    if !served {
        return Err(VmCtlError::NoCrd);
    }
    let name = args.action.name();
    let api: Api<ProxmoxVirtualMachine> = Api::namespaced(client, ns);
    let pvm = api
        .get_opt(name)
        .await
        .map_err(kube(format!("reading {KIND} {ns}/{name}")))?
        .ok_or_else(|| VmCtlError::NotFound {
            namespace: ns.to_owned(),
            name: name.to_owned(),
        })?;
    if let VmAction::Console { .. } = args.action {
        return pvm
            .status
            .and_then(|s| s.console_url)
            .ok_or_else(|| VmCtlError::NoConsole(format!("{ns}/{name}")));
    }
    let stamp = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y%m%d%H%M%S")
        .to_string();
    if let Some((object, plural)) = operation_object(&args.action, ns, &stamp) {
        return create_operation(api.into_client(), object, plural, ns).await;
    }
    let (patch, message) = plan(&args.action, &pvm, &now());
    if let Some(p) = patch {
        let params = PatchParams {
            field_manager: Some("capmox-vm".into()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(&p))
            .await
            .map_err(kube(format!("updating {KIND} {ns}/{name}")))?;
    }
    Ok(message)
}

/// `capmox vm …` from the command line: the kubeconfig's (or in-cluster) client and namespace.
pub async fn main(args: &VmArgs) -> Result<String, VmCtlError> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| VmCtlError::Config(e.to_string()))?;
    let ns = config.default_namespace.clone();
    let client = kube::Client::try_from(crate::user_agent::with_user_agent(config))
        .map_err(|e| VmCtlError::Config(e.to_string()))?;
    run(args, client, &ns).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pvm(strategy: &str) -> ProxmoxVirtualMachine {
        serde_json::from_value(json!({
            "apiVersion": capmox_api::vm::API_VERSION, "kind": KIND,
            "metadata": {"name": "db", "namespace": "apps"},
            "spec": {"templateID": 100, "runStrategy": strategy}
        }))
        .unwrap()
    }

    #[test]
    fn operation_verbs_make_their_objects() {
        let snap = VmAction::Snapshot {
            name: "db".into(),
            memory: true,
            description: Some("before".into()),
        };
        let (o, plural) = operation_object(&snap, "apps", "20260101000000").unwrap();
        assert_eq!(plural, "proxmoxvmsnapshots");
        assert_eq!(o["metadata"]["name"], "db-20260101000000");
        assert_eq!(
            o["spec"],
            json!({"source": {"name": "db"}, "includeMemory": true, "description": "before"})
        );
        let restore = VmAction::Restore {
            name: "db".into(),
            snapshot: "s1".into(),
        };
        let (o, _) = operation_object(&restore, "apps", "1").unwrap();
        assert_eq!(o["spec"], json!({"target": {"name": "db"}, "snapshotName": "s1"}));
        let clone = VmAction::Clone {
            source: "db".into(),
            target: "db2".into(),
            linked: true,
        };
        let (o, _) = operation_object(&clone, "apps", "1").unwrap();
        assert_eq!(
            (o["kind"].as_str(), o["metadata"]["name"].as_str()),
            (Some("ProxmoxVMClone"), Some("db2"))
        );
        assert_eq!(o["spec"]["linked"], true);
        assert!(operation_object(&VmAction::Pause { name: "db".into() }, "apps", "1").is_none());
    }

    #[test]
    fn verbs_follow_the_run_strategy() {
        let start = VmAction::Start { name: "db".into() };
        let stop = VmAction::Stop { name: "db".into() };
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(
            plan(&start, &pvm("Halted"), now).0.unwrap(),
            json!({"spec": {"runStrategy": "Always"}})
        );
        assert!(plan(&start, &pvm("Always"), now).0.is_none());
        assert_eq!(
            plan(&start, &pvm("Manual"), now).0.unwrap()["metadata"]["annotations"][POWER_REQUEST_ANNOTATION],
            "start@2026-01-01T00:00:00Z"
        );
        assert_eq!(
            plan(&stop, &pvm("RerunOnFailure"), now).0.unwrap(),
            json!({"spec": {"runStrategy": "Halted"}})
        );
        assert_eq!(
            plan(&VmAction::Restart { name: "db".into() }, &pvm("Always"), now)
                .0
                .unwrap(),
            json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}})
        );
    }
}
