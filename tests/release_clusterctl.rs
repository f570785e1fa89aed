//! Both template generations, judged by the real clusterctl of their generation
//! (`../shared/tools/clusterctl`: v1.10.2 for the v1beta1 series v0.10.x, v1.13.4 for the v1beta2
//! series v0.11.x) and by the API server with that CAPI generation's CRDs.
//!
//! `make release` writes both series into a clusterctl local repository; for each generation,
//! every flavor goes through `clusterctl generate cluster --list-variables` (every required
//! variable must have a value among the test's) and `clusterctl generate cluster`, and what it
//! prints — plus every ClusterClass file — is applied with `--dry-run=server` to a control plane
//! holding CAPI's CRDs of that release (`../shared/tools/capi/crd-*`), its kubeadm CRDs (from the
//! offline repository's components), our CRDs, the IPAM CRDs and permissive CRDs for the Talos and
//! Kamaji kinds of that generation (KamajiControlPlane `v1alpha1` for Kamaji ≤ v0.19 next to CAPI
//! v1.10, `v1alpha2` for Kamaji ≥ v0.20): nothing of the other generation may be in it.
//!
//! With the real kube-apiserver, the README's recipe runs too: `clusterctl init` with the `latest`
//! URL picks the series of its own contract, `clusterctl upgrade apply --infrastructure
//! capmox-system/proxmox:<next patch>` moves it, and `clusterctl generate cluster` then writes that
//! generation's objects; and the README's swap: capmox v0.9.0 (its `config/` from
//! `../shared/compat`) installed by clusterctl v1.13.4 is replaced by `upgrade apply` with ours.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use capmox::packaging::release::{self, Image, ReleaseOptions};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use release_support::*;
use serde_json::Value;
use testenv::TestEnv;

const NS: &str = "generations";

/// One contract generation.
#[derive(Debug, Clone, Copy)]
struct Generation {
    /// clusterctl and CAPI release of it.
    capi: &'static str,
    /// Our release series of that contract.
    series: &'static str,
    /// CAPI's API version.
    capi_api: &'static str,
    /// Our API version.
    infra_api: &'static str,
    /// KamajiControlPlane's version there.
    kamaji_api: &'static str,
}

const GENERATIONS: [Generation; 2] = [
    Generation {
        capi: "v1.10.2",
        series: "v0.10",
        capi_api: "v1beta1",
        infra_api: "v1alpha1",
        kamaji_api: "v1alpha1",
    },
    Generation {
        capi: "v1.13.4",
        series: "v0.11",
        capi_api: "v1beta2",
        infra_api: "v1alpha2",
        kamaji_api: "v1alpha2",
    },
];

impl Generation {
    fn other(&self) -> &'static Generation {
        if self.capi == GENERATIONS[0].capi {
            &GENERATIONS[1]
        } else {
            &GENERATIONS[0]
        }
    }
}

/// The real clusterctl of `version`, or `None` after one line saying what is missing.
fn clusterctl(version: &str) -> Option<PathBuf> {
    let setup = shared("tools/clusterctl/setup.sh")?;
    let out = Command::new(&setup).arg(version).output().ok()?;
    if !out.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A clusterctl local repository with the releases `versions` of ours, and the `clusterctl.yaml`
/// of the README (the `latest` URL) plus CAPI's own providers of `capi` from `../shared`.
struct LocalRepo {
    dir: tempfile::TempDir,
}

impl LocalRepo {
    fn new(versions: &[&str]) -> Self {
        let repo = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        for v in versions {
            repo.add(v);
        }
        repo
    }

    fn base(&self) -> PathBuf {
        self.dir.path().join("repository")
    }

    /// `make release` of `version` into `<base>/infrastructure-proxmox/<version>/`.
    fn add(&self, version: &str) {
        let out = self.base().join("infrastructure-proxmox").join(version);
        release::write_release(&ReleaseOptions {
            repo: repo(),
            out: out.clone(),
            version: version.into(),
            image: Image::parse(&format!("ghcr.io/capmox-rs/capmox-rs:{version}")).unwrap(),
            kubectl: "kubectl".into(),
        })
        .unwrap_or_else(|e| panic!("make release {version}: {e}"));
    }

    /// capmox v0.9.0 as its release would be: its `config/` rendered with its CRDs
    /// (`../shared/compat/capmox-v0.9`) and its `metadata.yaml`; `false` when that is missing.
    fn add_capmox(&self) -> bool {
        let (Some(config), Some(crds), Some(metadata)) = (
            shared("compat/capmox-v0.9/config"),
            shared("compat/capmox-v0.9/crd"),
            shared("compat/capmox-v0.9/metadata.yaml"),
        ) else {
            return false;
        };
        let tree = self.dir.path().join("capmox-tree");
        copy_dir(&config, &tree.join("config"));
        copy_dir(&crds, &tree.join("config/crd/bases"));
        let out = self.base().join("infrastructure-proxmox/v0.9.0");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            out.join("infrastructure-components.yaml"),
            kustomize(&tree.join("config/default")),
        )
        .unwrap();
        std::fs::copy(metadata, out.join("metadata.yaml")).unwrap();
        true
    }

    /// `clusterctl.yaml` pointing `proxmox` at the `latest` URL and CAPI's providers at
    /// `../shared/tools/clusterctl/repo-<capi>`; the path of the file.
    fn config(&self, capi: &str) -> PathBuf {
        let capi_repo = shared_dir().join(format!("tools/clusterctl/repo-{capi}"));
        let text = format!(
            "providers:\n\
             - {{name: proxmox, type: InfrastructureProvider, url: {base}/infrastructure-proxmox/latest/infrastructure-components.yaml}}\n\
             - {{name: cluster-api, type: CoreProvider, url: {r}/cluster-api/{capi}/core-components.yaml}}\n\
             - {{name: kubeadm, type: BootstrapProvider, url: {r}/bootstrap-kubeadm/{capi}/bootstrap-components.yaml}}\n\
             - {{name: kubeadm, type: ControlPlaneProvider, url: {r}/control-plane-kubeadm/{capi}/control-plane-components.yaml}}\n",
            base = self.base().display(),
            r = capi_repo.display(),
        );
        let path = self.dir.path().join(format!("clusterctl-{capi}.yaml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs clusterctl with `args`, the repository's config and `env`; (ok, stdout, stderr).
    fn run(
        &self,
        bin: &Path,
        capi: &str,
        args: &[&str],
        env: &BTreeMap<String, String>,
    ) -> (bool, String, String) {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let out = Command::new(bin)
            .args(args)
            .arg("--config")
            .arg(self.config(capi))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
            .envs(env)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The names under "Required Variables:" of `--list-variables`.
fn required_variables(listing: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in listing.lines() {
        if line.starts_with("Required Variables:") {
            inside = true;
        } else if line.ends_with("Variables:") {
            inside = false;
        } else if inside && let Some(name) = line.trim().strip_prefix("- ") {
            out.push(name.split_whitespace().next().unwrap_or_default().to_owned());
        }
    }
    out
}

fn crd(v: Value) -> CustomResourceDefinition {
    serde_json::from_value(v).unwrap()
}

/// The CRDs of a generation: CAPI's core and kubeadm CRDs of that release, ours, IPAM's, and
/// permissive ones for the Talos and Kamaji kinds of that generation (no conversion: the
/// dry-run judges each object in the version it is written in).
async fn install_generation_crds(env: &TestEnv, g: &Generation) -> bool {
    let (Some(core), Some(ipam), Some(capi_repo)) = (
        shared(&format!("tools/capi/crd-{}", g.capi)),
        shared("compat/ipam-in-cluster"),
        shared(&format!("tools/clusterctl/repo-{}", g.capi)),
    ) else {
        return false;
    };
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    env.install_crds_from_path(&core).await.unwrap();
    env.install_crds_from_path(&ipam).await.unwrap();
    let mut crds = Vec::new();
    for file in [
        format!("control-plane-kubeadm/{0}/control-plane-components.yaml", g.capi),
        format!("bootstrap-kubeadm/{0}/bootstrap-components.yaml", g.capi),
    ] {
        let text = std::fs::read_to_string(capi_repo.join(file)).unwrap();
        let text = capmox::packaging::envsubst::process(&text, &|_| Some(String::new())).unwrap();
        for mut d in documents(&text) {
            if d["kind"] == "CustomResourceDefinition" {
                d["spec"].as_object_mut().unwrap().remove("conversion");
                d["metadata"].as_object_mut().unwrap().remove("annotations");
                crds.push(crd(d));
            }
        }
    }
    for (group, kind, version) in [
        ("controlplane.cluster.x-k8s.io", "TalosControlPlane", "v1alpha3"),
        ("bootstrap.cluster.x-k8s.io", "TalosConfigTemplate", "v1alpha3"),
        (
            "controlplane.cluster.x-k8s.io",
            "KamajiControlPlane",
            g.kamaji_api,
        ),
    ] {
        crds.push(crd(permissive_crd(group, kind, &[version], true)));
    }
    env.install_crds(crds).await.unwrap();
    true
}

/// Server-side dry-run of `docs` in `NS` on `env`.
fn dry_run(env: &TestEnv, what: &str, docs: &[Value]) {
    let mut docs = docs.to_vec();
    for d in &mut docs {
        let cluster_scoped =
            ["GlobalInClusterIPPool", "Namespace"].contains(&d["kind"].as_str().unwrap_or(""));
        if !cluster_scoped && d["metadata"]["namespace"].is_null() {
            d["metadata"]["namespace"] = Value::from(NS);
        }
    }
    let (ok, out, err) = tokio::task::block_in_place(|| {
        kubectl(
            Some(env.kubeconfig_path()),
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=release-test",
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(&to_yaml_stream(&docs)),
        )
    });
    assert!(ok, "{what}: the API server refused it:\n{err}\n{out}");
}

/// Every apiVersion of `docs` belongs to generation `g`, none to the other.
fn of_generation(what: &str, docs: &[Value], g: &Generation) {
    let other = g.other();
    for d in docs {
        let av = d["apiVersion"].as_str().unwrap_or("");
        let kind = d["kind"].as_str().unwrap_or("");
        let bad = av == format!("cluster.x-k8s.io/{}", other.capi_api)
            || av == format!("controlplane.cluster.x-k8s.io/{}", other.capi_api)
            || av == format!("bootstrap.cluster.x-k8s.io/{}", other.capi_api)
            || av == format!("infrastructure.cluster.x-k8s.io/{}", other.infra_api)
            || (kind == "KamajiControlPlane" && !av.ends_with(g.kamaji_api));
        assert!(
            !bad,
            "{what}: {kind} {av} belongs to CAPI {}'s generation",
            other.capi
        );
        let text = d.to_string();
        assert!(
            !text.contains(&format!(
                "\"apiVersion\":\"infrastructure.cluster.x-k8s.io/{}\"",
                other.infra_api
            )),
            "{what}: {kind} refers to {}",
            other.infra_api
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_flavor_of_both_generations_passes_its_clusterctl_and_api_server() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let versions: Vec<String> = GENERATIONS.iter().map(|g| format!("{}.0", g.series)).collect();
    let (Some(_), Some(_)) = (clusterctl("v1.10.2"), clusterctl("v1.13.4")) else {
        return;
    };
    let repo = LocalRepo::new(&versions.iter().map(String::as_str).collect::<Vec<_>>());
    let mut values = template_values(NS);
    values.remove("NAMESPACE");
    for g in &GENERATIONS {
        let bin = clusterctl(g.capi).unwrap();
        let env = TestEnv::start().await.unwrap();
        if !install_generation_crds(&env, g).await {
            return;
        }
        let (ok, out, err) = tokio::task::block_in_place(|| {
            kubectl(Some(env.kubeconfig_path()), &["create", "namespace", NS], None)
        });
        assert!(ok, "{out}{err}");
        let version = format!("{}.0", g.series);
        let folder = repo.base().join("infrastructure-proxmox").join(&version);
        let mut flavors = 0;
        // Judged at once (one kubectl run per generation): each flavor's cluster has its own name.
        let mut judged: Vec<Value> = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(class) = name.strip_prefix("clusterclass-") {
                let docs = documents(&std::fs::read_to_string(&file).unwrap());
                of_generation(&name, &docs, g);
                assert!(docs.iter().any(|d| d["kind"] == "ClusterClass"), "{class}");
                judged.extend(docs);
                continue;
            }
            let Some(rest) = name.strip_prefix("cluster-template") else {
                continue;
            };
            flavors += 1;
            let flavor = rest.trim_start_matches('-').trim_end_matches(".yaml");
            let infra = format!("proxmox:{version}");
            let cluster = format!("t-{}", if flavor.is_empty() { "default" } else { flavor });
            let mut args = vec![
                "generate",
                "cluster",
                cluster.as_str(),
                "--infrastructure",
                infra.as_str(),
                "--target-namespace",
                NS,
                "--kubernetes-version",
                "v1.33.1",
                "--control-plane-machine-count",
                "3",
                "--worker-machine-count",
                "2",
            ];
            if !flavor.is_empty() {
                args.extend(["--flavor", flavor]);
            }
            let what = format!("clusterctl {} generate cluster --flavor {flavor:?}", g.capi);
            let mut listing = args.clone();
            listing.push("--list-variables");
            let (ok, out, err) = repo.run(&bin, g.capi, &listing, &BTreeMap::new());
            assert!(ok, "{what} --list-variables: {err}{out}");
            let required = required_variables(&out);
            assert!(!required.is_empty(), "{what}: {out}");
            let env_values: BTreeMap<String, String> = required
                .iter()
                .map(|n| {
                    let v = values
                        .get(n)
                        .unwrap_or_else(|| panic!("{what}: no test value for the required variable {n}"));
                    (n.clone(), v.clone())
                })
                .collect();
            let (ok, out, err) = repo.run(&bin, g.capi, &args, &env_values);
            assert!(ok, "{what}: {err}{out}");
            let docs = documents(&out);
            assert!(docs.len() >= 4, "{what}: {out}");
            of_generation(&what, &docs, g);
            judged.extend(docs);
        }
        assert_eq!(flavors, 12, "{}", g.capi);
        dry_run(
            &env,
            &format!(
                "CAPI {}: the flavors clusterctl generated and the ClusterClasses",
                g.capi
            ),
            &judged,
        );
        eprintln!(
            "clusterctl {}: {flavors} flavors of {version} generated and accepted, ClusterClasses accepted",
            g.capi
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::write(&target, std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
}

/// The image of the manager Deployment.
fn manager_image(env: &TestEnv) -> String {
    let (ok, out, err) = kubectl(
        Some(env.kubeconfig_path()),
        &[
            "get",
            "deployment",
            "-n",
            "capmox-system",
            "capmox-controller-manager",
            "-o",
            "jsonpath={.spec.template.spec.containers[?(@.name==\"manager\")].image}",
        ],
        None,
    );
    assert!(ok, "{err}{out}");
    out
}

/// The installed version of our provider in clusterctl's inventory.
fn installed_version(env: &TestEnv) -> String {
    let (ok, out, err) = kubectl(
        Some(env.kubeconfig_path()),
        &[
            "get",
            "providers.clusterctl.cluster.x-k8s.io",
            "-n",
            "capmox-system",
            "infrastructure-proxmox",
            "-o",
            "jsonpath={.version}",
        ],
        None,
    );
    assert!(ok, "reading clusterctl's inventory: {err}{out}");
    out
}

/// The README's recipe with each clusterctl: `init` with the `latest` URL installs the newest
/// release of the series of its contract, `clusterctl upgrade apply --infrastructure
/// capmox-system/proxmox:<next patch>` moves to the next one, and `generate cluster` (version
/// from the management cluster) writes that generation's objects. Real kube-apiserver only
/// (clusterctl installs Deployments, RBAC and webhook configurations).
#[tokio::test(flavor = "multi_thread")]
async fn readme_recipe_init_and_upgrade_pick_the_series_of_their_contract() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let (Some(_), Some(_), Some(stub)) = (
        clusterctl("v1.10.2"),
        clusterctl("v1.13.4"),
        shared("tools/clusterctl/cert-manager-stub-crds.yaml"),
    ) else {
        return;
    };
    if testenv::real::binaries_from_env().is_none() {
        eprintln!(
            "skipped: clusterctl init needs the real kube-apiserver (KUBEBUILDER_ASSETS; make test-real)"
        );
        return;
    }
    let repo = LocalRepo::new(&["v0.10.0", "v0.11.0"]);
    let mut values = template_values(NS);
    values.remove("NAMESPACE");
    for g in &GENERATIONS {
        let bin = clusterctl(g.capi).unwrap();
        let env = TestEnv::start().await.unwrap();
        let kc = env.kubeconfig_path().to_string_lossy().into_owned();
        tokio::task::block_in_place(|| {
            let (ok, out, err) = kubectl(
                Some(env.kubeconfig_path()),
                &["apply", "-f", stub.to_str().unwrap()],
                None,
            );
            assert!(ok, "{out}{err}");
            let init = [
                "init",
                "--core",
                "cluster-api",
                "--bootstrap",
                "kubeadm",
                "--control-plane",
                "kubeadm",
                "--infrastructure",
                "proxmox",
                "--kubeconfig",
                kc.as_str(),
            ];
            let (ok, out, err) = repo.run(&bin, g.capi, &init, &BTreeMap::new());
            assert!(ok, "clusterctl {} init: {err}{out}", g.capi);
            let first = format!("{}.0", g.series);
            assert_eq!(installed_version(&env), first, "clusterctl {} init", g.capi);

            let next = format!("{}.1", g.series);
            repo.add(&next);
            let target = format!("capmox-system/proxmox:{next}");
            let upgrade = [
                "upgrade",
                "apply",
                "--infrastructure",
                target.as_str(),
                "--kubeconfig",
                kc.as_str(),
            ];
            let (ok, out, err) = repo.run(&bin, g.capi, &upgrade, &BTreeMap::new());
            assert!(ok, "clusterctl {} upgrade apply: {err}{out}", g.capi);
            assert_eq!(
                installed_version(&env),
                next,
                "clusterctl {} upgrade apply",
                g.capi
            );

            let generate = [
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                "proxmox",
                "--flavor",
                "calico",
                "--kubernetes-version",
                "v1.33.1",
                "--target-namespace",
                NS,
                "--kubeconfig",
                kc.as_str(),
            ];
            let (ok, out, err) = repo.run(&bin, g.capi, &generate, &values);
            assert!(ok, "clusterctl {} generate cluster: {err}{out}", g.capi);
            of_generation("generate cluster after init", &documents(&out), g);
            eprintln!(
                "clusterctl {}: init installed {first}, upgrade apply moved to {next}, generate cluster wrote {} objects",
                g.capi, g.capi_api
            );
        });
    }

    // Swapping an installed capmox v0.9 (CAPI >= v1.11) with the README's command.
    if !repo.add_capmox() {
        return;
    }
    let g = &GENERATIONS[1];
    let bin = clusterctl(g.capi).unwrap();
    let env = TestEnv::start().await.unwrap();
    let kc = env.kubeconfig_path().to_string_lossy().into_owned();
    tokio::task::block_in_place(|| {
        let (ok, out, err) = kubectl(
            Some(env.kubeconfig_path()),
            &["apply", "-f", stub.to_str().unwrap()],
            None,
        );
        assert!(ok, "{out}{err}");
        let init = [
            "init",
            "--core",
            "cluster-api",
            "--bootstrap",
            "kubeadm",
            "--control-plane",
            "kubeadm",
            "--infrastructure",
            "proxmox:v0.9.0",
            "--kubeconfig",
            kc.as_str(),
        ];
        let (ok, out, err) = repo.run(&bin, g.capi, &init, &BTreeMap::new());
        assert!(ok, "clusterctl init of capmox v0.9.0: {err}{out}");
        assert_eq!(installed_version(&env), "v0.9.0");
        assert!(
            manager_image(&env).contains("ionos-cloud"),
            "{}",
            manager_image(&env)
        );
        let target = "capmox-system/proxmox:v0.11.1";
        let upgrade = [
            "upgrade",
            "apply",
            "--infrastructure",
            target,
            "--kubeconfig",
            kc.as_str(),
        ];
        let (ok, out, err) = repo.run(&bin, g.capi, &upgrade, &BTreeMap::new());
        assert!(ok, "clusterctl upgrade apply over capmox: {err}{out}");
        assert_eq!(installed_version(&env), "v0.11.1");
        assert_eq!(manager_image(&env), "ghcr.io/capmox-rs/capmox-rs:v0.11.1");
    });
    eprintln!(
        "clusterctl v1.13.4: capmox v0.9.0 swapped for v0.11.1 by `upgrade apply --infrastructure capmox-system/proxmox:v0.11.1`"
    );
}
