#![allow(clippy::unwrap_used)]

use super::*;

const V1ALPHA1_TEMPLATE: &str = r#"# A workload cluster, capmox v0.7 style.
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: "${CLUSTER_NAME}"
spec:
  clusterNetwork:
    pods:
      cidrBlocks: ["10.244.0.0/16"]
  infrastructureRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
    kind: ProxmoxCluster
    name: "${CLUSTER_NAME}"
  controlPlaneRef:
    kind: KubeadmControlPlane
    apiVersion: controlplane.cluster.x-k8s.io/v1beta1
    name: "${CLUSTER_NAME}-cp"
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: ProxmoxCluster
metadata:
  name: "${CLUSTER_NAME}"
spec:
  controlPlaneEndpoint:
    host: ${CONTROL_PLANE_ENDPOINT_IP}
    port: 6443
  ipv4Config:
    addresses: ${NODE_IP_RANGES}
    prefix: ${IP_PREFIX}
    gateway: ${GATEWAY}
  dnsServers: ${DNS_SERVERS}
  allowedNodes: ${ALLOWED_NODES:=[]}
---
kind: KubeadmControlPlane
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
metadata:
  name: "${CLUSTER_NAME}-cp"
spec:
  replicas: ${CONTROL_PLANE_MACHINE_COUNT}
  machineTemplate:
    infrastructureRef:
      kind: ProxmoxMachineTemplate
      apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
      name: "${CLUSTER_NAME}-cp"
    nodeDrainTimeout: 5m
  kubeadmConfigSpec:
    users:
      - name: root
        sshAuthorizedKeys: [${VM_SSH_KEYS}]
    clusterConfiguration:
      apiServer:
        timeoutForControlPlane: 20m
        extraArgs:
          audit-log-maxage: "30"
    initConfiguration:
      nodeRegistration:
        kubeletExtraArgs:
          # the node's identity
          provider-id: "proxmox://'{{ ds.meta_data.instance_id }}'"
    joinConfiguration:
      nodeRegistration:
        kubeletExtraArgs:
          provider-id: "proxmox://'{{ ds.meta_data.instance_id }}'"
  version: "${KUBERNETES_VERSION}"
---
kind: ProxmoxMachineTemplate
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
metadata:
  name: "${CLUSTER_NAME}-cp"
spec:
  template:
    spec:
      sourceNode: "${PROXMOX_SOURCENODE}"
      templateID: ${TEMPLATE_VMID}
      format: "qcow2"
      full: true
      numSockets: ${NUM_SOCKETS:=2}
      memoryMiB: ${MEMORY_MIB:=16384}
      disks:
        bootVolume:
          disk: ${BOOT_VOLUME_DEVICE}
          sizeGb: ${BOOT_VOLUME_SIZE:=100}
      network:
        # the VM's first NIC
        default:
          bridge: ${BRIDGE} # the LAN
          model: virtio
          vlan: ${VLAN}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: "${CLUSTER_NAME}-workers"
spec:
  clusterName: "${CLUSTER_NAME}"
  replicas: ${WORKER_MACHINE_COUNT}
  minReadySeconds: 10
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      deletePolicy: Oldest
  selector:
    matchLabels: {}
  template:
    spec:
      clusterName: "${CLUSTER_NAME}"
      version: "${KUBERNETES_VERSION}"
      bootstrap:
        configRef:
          name: "${CLUSTER_NAME}-worker"
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
      infrastructureRef:
        name: "${CLUSTER_NAME}-worker"
        apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
        kind: ProxmoxMachineTemplate
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineHealthCheck
metadata:
  name: "${CLUSTER_NAME}-mhc"
spec:
  clusterName: "${CLUSTER_NAME}"
  maxUnhealthy: 40%
  nodeStartupTimeout: 15m
  selector:
    matchLabels:
      node-role.kubernetes.io/node: ""
  unhealthyConditions:
    - type: Ready
      status: Unknown
      timeout: 300s
---
apiVersion: v1
kind: Secret
metadata:
  name:   untouched  # spacing kept
stringData: {a: b}
"#;

fn values() -> std::collections::BTreeMap<String, String> {
    [
        ("CLUSTER_NAME", "c1"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.5"),
        ("NODE_IP_RANGES", "[10.0.0.10-10.0.0.20]"),
        ("IP_PREFIX", "24"),
        ("GATEWAY", "10.0.0.1"),
        ("DNS_SERVERS", "[1.1.1.1, 8.8.8.8]"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("VM_SSH_KEYS", "ssh-ed25519 AAAA a, ssh-ed25519 BBBB b"),
        ("KUBERNETES_VERSION", "v1.33.1"),
        ("PROXMOX_SOURCENODE", "pve1"),
        ("TEMPLATE_VMID", "9000"),
        ("BOOT_VOLUME_DEVICE", "scsi0"),
        ("BRIDGE", "vmbr0"),
        ("VLAN", "42"),
        ("WORKER_MACHINE_COUNT", "2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn docs(text: &str) -> Vec<serde_json::Value> {
    let substituted = crate::packaging::envsubst::process_with(text, &values()).unwrap();
    serde_saphyr::from_multiple::<serde_json::Value>(&substituted)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn converts_a_v1alpha1_cluster_template() {
    let out = convert_text(V1ALPHA1_TEMPLATE, "t.yaml").unwrap();
    assert_eq!(out.warnings, Vec::<String>::new());
    let o = &out.output;
    for want in [
        "# A workload cluster, capmox v0.7 style.\n---\napiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\n",
        "  infrastructureRef:\n    apiGroup: infrastructure.cluster.x-k8s.io\n    kind: ProxmoxCluster\n",
        "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\nkind: ProxmoxCluster\n",
        "    addresses: ${NODE_IP_RANGES}\n    prefix: ${IP_PREFIX}\n",
        "  allowedNodes: ${ALLOWED_NODES:=[]}\n",
        "  machineTemplate:\n    spec:\n      infrastructureRef:\n        kind: ProxmoxMachineTemplate\n        apiGroup: infrastructure.cluster.x-k8s.io\n        name: \"${CLUSTER_NAME}-cp\"\n      deletion:\n        nodeDrainTimeoutSeconds: 300\n",
        "        sshAuthorizedKeys: [${VM_SSH_KEYS}]\n",
        "          - name: audit-log-maxage\n            value: \"30\"\n",
        "        kubeletExtraArgs:\n          # the node's identity\n          - name: provider-id\n            value: \"proxmox://'{{ ds.meta_data.instance_id }}'\"\n",
        "      timeouts:\n        controlPlaneComponentHealthCheckSeconds: 1200\n",
        "      numSockets: ${NUM_SOCKETS:=2}\n",
        "      network:\n        # the VM's first NIC\n        networkDevices:\n          - bridge: ${BRIDGE} # the LAN\n            model: virtio\n            vlan: ${VLAN}\n            defaultIPv4: true\n            defaultIPv6: true\n            name: net0\n",
        "      minReadySeconds: 10\n  deletion:\n    order: Oldest\n  rollout:\n    strategy:\n",
        "  checks:\n    nodeStartupTimeoutSeconds: 900\n    unhealthyNodeConditions:\n      - type: Ready\n        status: Unknown\n        timeoutSeconds: 300\n  remediation:\n    triggerIf:\n      unhealthyLessThanOrEqualTo: 40%\n",
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name:   untouched  # spacing kept\nstringData: {a: b}\n",
    ] {
        assert!(o.contains(want), "missing:\n{want}\nin:\n{o}");
    }
    assert!(!o.contains("v1alpha1") && !o.contains("v1beta1"), "{o}");
    // Converting again changes nothing.
    let again = convert_text(o, "t.yaml").unwrap();
    assert_eq!(&again.output, o);
    assert!(again.warnings.is_empty());
}

#[test]
fn variables_keep_their_types_through_the_conversion() {
    let out = convert_text(V1ALPHA1_TEMPLATE, "t.yaml").unwrap();
    let before = docs(V1ALPHA1_TEMPLATE);
    let after = docs(&out.output);
    assert_eq!(before.len(), after.len());
    let mut proxmox = 0;
    for (b, a) in before.iter().zip(&after) {
        if b["apiVersion"] == capmox_api::v1alpha1::API_VERSION {
            proxmox += 1;
            let want =
                capmox_api::conversion::convert_value(b.clone(), capmox_api::v1alpha2::API_VERSION).unwrap();
            assert_eq!(a, &want);
        }
    }
    assert_eq!(proxmox, 2);
    // The ssh keys variable still expands to two keys.
    let kcp = &after[2];
    assert_eq!(
        kcp["spec"]["kubeadmConfigSpec"]["users"][0]["sshAuthorizedKeys"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(kcp["spec"]["replicas"], 3);
}

#[test]
fn what_v1alpha2_cannot_express_is_reported() {
    let input = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxCluster\nmetadata:\n  name: c\nspec:\n  # pointless since v0.6\n  cloneSpec:\n    machineSpec:\n      controlPlane:\n        sourceNode: pve\n    sshAuthorizedKeys: [a]\n  dnsServers: [1.1.1.1]\n  ipv4Config:\n    addresses: [10.0.0.2-10.0.0.9]\n    prefix: 24\n    gateway: 10.0.0.1\nstatus:\n  ready: true\n";
    let out = convert_text(input, "c.yaml").unwrap();
    assert!(!out.output.contains("cloneSpec"), "{}", out.output);
    assert!(!out.output.contains("conversion-data"), "{}", out.output);
    assert!(!out.output.contains("status"), "{}", out.output);
    let w = out.warnings.join("\n");
    assert!(
        w.contains(
            "c.yaml: document 1 ProxmoxCluster/c: v1alpha2 cannot express all of this object; converting back would differ at: spec.cloneSpec"
        ),
        "{w}"
    );
    assert!(
        w.contains("comment on spec.cloneSpec dropped: # pointless since v0.6"),
        "{w}"
    );
    assert!(w.contains("status dropped"), "{w}");
}

#[test]
fn clear_errors_for_what_cannot_be_converted() {
    let cases = [
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata:\n  name: m\nspec:\n  full: ${FULL}\n",
            "spec.full: the variable expression ${FULL} stands for a boolean value",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata:\n  name: m\nspec:\n  numCores: ${A}${B}\n",
            "spec.numCores: the variable expression ${A}${B} stands for a integer value",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata:\n  name: m\nspec:\n  numCorez: 2\n",
            "spec.numCorez: unknown field in v1alpha1 ProxmoxMachine",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata:\n  name: m\n  annotations:\n    cluster.x-k8s.io/conversion-data: '{}'\nspec: {}\n",
            "read from a cluster",
        ),
        (
            "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachine\nmetadata: [\n",
            "not valid YAML",
        ),
    ];
    for (input, want) in cases {
        let err = convert_text(&format!("---\n{input}"), "m.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("m.yaml: document 1 (line 1)"), "{err}");
        assert!(err.contains(want), "{err}\nwanted: {want}");
    }
}

#[test]
fn capi_objects_that_cannot_be_converted_stay_as_they_are() {
    let input = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Machine\nmetadata:\n  name: m\nspec:\n  clusterName: c\n  nodeDrainTimeout: ${DRAIN}\n---\napiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: cc\nspec: {}\n";
    let out = convert_text(input, "x.yaml").unwrap();
    assert_eq!(out.output, input);
    assert_eq!(
        out.warnings,
        [
            "x.yaml: document 1 Machine/m: left at cluster.x-k8s.io/v1beta1: nodeDrainTimeout is a variable; v1beta2 needs whole seconds",
            "x.yaml: document 2 ClusterClass/cc: left at cluster.x-k8s.io/v1beta1 (not converted by this tool; CAPI still serves it)",
        ]
    );
}

#[test]
fn topology_clusters_and_refs_with_namespaces() {
    let input = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  topology:\n    class: proxmox-clusterclass-v0.2.1\n    classNamespace: shared\n    version: v1.33.1\n    controlPlane:\n      replicas: 1\n      nodeDrainTimeout: 1m30s\n    workers:\n      machineDeployments:\n        - class: proxmox-worker\n          name: md-0\n          replicas: 2\n          machineHealthCheck:\n            enable: true\n            maxUnhealthy: 33%\n";
    let out = convert_text(input, "x.yaml").unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert!(out.output.contains("    classRef:\n      name: proxmox-clusterclass-v0.2.1\n      namespace: shared\n    version: v1.33.1\n"), "{}", out.output);
    assert!(
        out.output
            .contains("      deletion:\n        nodeDrainTimeoutSeconds: 90\n"),
        "{}",
        out.output
    );
    assert!(out.output.contains("          healthCheck:\n            enabled: true\n            remediation:\n              triggerIf:\n                unhealthyLessThanOrEqualTo: 33%\n"), "{}", out.output);
}

#[test]
fn cli_flags_like_capmox() {
    use clap::Parser;
    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: ConvertArgs,
    }
    let args = normalize_args(
        ["x", "convert", "-f", "a.yaml", "--filename=b.yaml", "-i.bak"]
            .map(Into::into)
            .to_vec(),
    );
    let t = T::parse_from(args.into_iter().filter(|a| a != "convert"));
    assert_eq!(t.a.filenames, [PathBuf::from("a.yaml"), PathBuf::from("b.yaml")]);
    assert_eq!(t.a.in_place.as_deref(), Some(".bak"));
    let t = T::parse_from(["x", "-f", "a.yaml", "--in-place"]);
    assert_eq!(t.a.in_place.as_deref(), Some(""));
    let t = T::parse_from(["x", "--in-place=.orig", "-f", "a.yaml"]);
    assert!(T::try_parse_from(["x", "--in-place", ".orig"]).is_err());
    assert_eq!(
        normalize_args(["capmox", "-i.x"].map(Into::into).to_vec()),
        ["capmox", "-i.x"]
    );
    assert_eq!(t.a.in_place.as_deref(), Some(".orig"));
    assert!(T::parse_from(["x"]).a.in_place.is_none());
}

#[test]
fn in_place_with_backup() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    let input = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachineTemplate\nmetadata:\n  name: t\nspec:\n  template:\n    spec:\n      sourceNode: pve\n      templateID: 100\n";
    std::fs::write(&file, input).unwrap();
    run(&ConvertArgs {
        filenames: vec![file.clone()],
        in_place: Some(".bak".into()),
        ..ConvertArgs::default()
    })
    .unwrap();
    let converted = std::fs::read_to_string(&file).unwrap();
    assert!(
        converted.starts_with("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\n"),
        "{converted}"
    );
    assert!(
        converted.contains("networkDevices:\n          - bridge: vmbr0\n"),
        "{converted}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("m.yaml.bak")).unwrap(),
        input
    );
    assert!(matches!(
        run(&ConvertArgs {
            filenames: vec![],
            in_place: Some(String::new()),
            ..ConvertArgs::default()
        }),
        Err(ConvertError::InPlaceWithoutFiles)
    ));
}
