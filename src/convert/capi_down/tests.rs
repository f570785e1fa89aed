#![allow(clippy::unwrap_used)]

use crate::convert::{Generation, convert_text_to};

fn down(text: &str) -> Result<String, String> {
    convert_text_to(text, "t.yaml", Generation::V1beta1)
        .map(|o| o.output)
        .map_err(|e| e.to_string())
}

#[test]
fn kubeadm_control_plane_goes_back_to_v1beta1_shapes() {
    let out = down(
        "apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: cp
spec:
  replicas: ${N}
  machineTemplate:
    spec:
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: ProxmoxMachineTemplate
        name: cp
      deletion:
        nodeDrainTimeoutSeconds: 90
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        extraArgs:
          - name: audit-log-path
            value: /var/log/audit.log
    initConfiguration:
      timeouts:
        controlPlaneComponentHealthCheckSeconds: 240
      nodeRegistration:
        kubeletExtraArgs:
          # the provider ID from the meta-data
          - name: provider-id
            value: \"proxmox://'{{ ds.meta_data.instance_id }}'\"
  rollout:
    after: \"2026-01-01T00:00:00Z\"
  remediation:
    maxRetry: 3
    retryPeriodSeconds: 60
",
    )
    .unwrap();
    for want in [
        "apiVersion: controlplane.cluster.x-k8s.io/v1beta1",
        "  replicas: ${N}",
        "  machineTemplate:\n    infrastructureRef:\n      apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\n",
        "    nodeDrainTimeout: 90s",
        "        extraArgs:\n          audit-log-path: /var/log/audit.log",
        "          # the provider ID from the meta-data\n          provider-id: \"proxmox://'{{ ds.meta_data.instance_id }}'\"",
        "        timeoutForControlPlane: 240s",
        "  rolloutAfter: \"2026-01-01T00:00:00Z\"",
        "  remediationStrategy:\n    maxRetry: 3\n    retryPeriod: 60s",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    assert!(!out.contains("timeouts"), "{out}");
}

#[test]
fn what_v1beta1_cannot_hold_stops_the_conversion() {
    let twice = "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: w
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs:
            - {name: node-labels, value: a=b}
            - {name: node-labels, value: c=d}
";
    let err = down(twice).unwrap_err();
    assert!(err.contains("names node-labels twice"), "{err}");
    let unknown = "apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDrainRule
metadata:
  name: r
";
    assert!(down(unknown).unwrap_err().contains("no v1beta1 conversion"));
    let gateway = "apiVersion: controlplane.cluster.x-k8s.io/v1alpha2
kind: KamajiControlPlane
metadata:
  name: k
spec:
  network:
    gateway:
      sectionName: https
";
    assert!(
        down(gateway)
            .unwrap_err()
            .contains("sectionName exists in v1alpha2 only")
    );
}

#[test]
fn references_name_the_v1beta1_generation_of_their_kind() {
    let out = down(
        "apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: c
spec:
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: KamajiControlPlane
    name: c
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: ProxmoxCluster
    name: c
  topology:
    classRef:
      name: cc
      namespace: classes
    version: v1.33.1
",
    )
    .unwrap();
    assert!(
        out.contains("apiVersion: controlplane.cluster.x-k8s.io/v1alpha1\n    kind: KamajiControlPlane"),
        "{out}"
    );
    assert!(
        out.contains("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\n    kind: ProxmoxCluster"),
        "{out}"
    );
    assert!(
        out.contains("    class: cc\n    classNamespace: classes\n"),
        "{out}"
    );
    let other = "apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: c
spec:
  infrastructureRef:
    apiGroup: infrastructure.example.com
    kind: FooCluster
    name: c
";
    assert!(
        down(other)
            .unwrap_err()
            .contains("no known v1beta1-generation version of FooCluster")
    );
}
