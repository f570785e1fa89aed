//! The release folder: what `make release` (the `capmox-release` binary) writes to `out/`.
//!
//! * `infrastructure-components.yaml` — `kubectl kustomize config/default` through a temporary
//!   overlay whose `images:` entry stamps the release image (kustomize's own image transformer);
//! * `metadata.yaml` — copied after checking that the version's release series is in it (the
//!   check `clusterctl init` makes);
//! * `cluster-template*.yaml` and `clusterclass-*.yaml` from `templates/` — as they are for a
//!   series of contract v1beta2; for a v1beta1 series (CAPI v1.10) converted to CAPI v1beta1,
//!   Proxmox v1alpha1 and KamajiControlPlane v1alpha1 by `capmox convert --to v1beta1`'s converter
//!   (one source, two generations; a field the old generation cannot express stops the release);
//! * `operator-components-<version>.yaml` — a ConfigMap named after the version, labelled for the
//!   Cluster API Operator's `InfrastructureProvider.spec.fetchConfig.selector`, the way the
//!   operator reads a compressed one: annotation `provider.cluster.x-k8s.io/compressed: "true"`,
//!   the components gzip-compressed in `binaryData.components`, `metadata` in `data`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::io::Write;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

/// The image the released components run when nothing else is said.
pub const DEFAULT_IMAGE_NAME: &str = "ghcr.io/capmox-rs/capmox-rs";
/// clusterctl's name of the provider (`clusterctl init --infrastructure proxmox`).
pub const PROVIDER_NAME: &str = "proxmox";
/// The components' namespace.
pub const NAMESPACE: &str = "capmox-system";

/// Errors of building a release.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// Bad input (image reference, version, metadata, components).
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `kubectl kustomize` failed.
    #[error("kubectl kustomize: {0}")]
    Kustomize(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReleaseError + '_ {
    move |source| ReleaseError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A container image reference split the way kustomize's `images:` wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Registry and repository.
    pub name: String,
    /// Tag, if any.
    pub tag: Option<String>,
    /// Digest (`sha256:…`), if any.
    pub digest: Option<String>,
}

impl Image {
    /// Parses `registry/repo[:tag][@digest]`.
    pub fn parse(reference: &str) -> Result<Self, ReleaseError> {
        let bad = || ReleaseError::Invalid(format!("'{reference}' is not an image reference"));
        let (rest, digest) = match reference.split_once('@') {
            Some((r, d)) if d.contains(':') => (r, Some(d.to_owned())),
            Some(_) => return Err(bad()),
            None => (reference, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                &rest[..last_slash + i],
                Some(rest[last_slash + i + 1..].to_owned()),
            ),
            None => (rest, None),
        };
        if name.is_empty() || name.contains(char::is_whitespace) || tag.as_deref() == Some("") {
            return Err(bad());
        }
        Ok(Self {
            name: name.to_owned(),
            tag,
            digest,
        })
    }

    /// The reference as written in a Pod spec.
    pub fn reference(&self) -> String {
        let mut s = self.name.clone();
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }
}

/// `metadata.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// `clusterctl.cluster.x-k8s.io/v1alpha3`.
    pub api_version: String,
    /// `Metadata`.
    pub kind: String,
    /// Release series → contract.
    pub release_series: Vec<ReleaseSeries>,
}

/// One release series.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ReleaseSeries {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// CAPI contract (`v1beta1`, `v1beta2`).
    pub contract: String,
}

impl Metadata {
    /// Parses and checks it the way clusterctl does.
    pub fn parse(text: &str) -> Result<Self, ReleaseError> {
        let m: Metadata =
            serde_saphyr::from_str(text).map_err(|e| ReleaseError::Invalid(format!("metadata.yaml: {e}")))?;
        if m.api_version != "clusterctl.cluster.x-k8s.io/v1alpha3" || m.kind != "Metadata" {
            return Err(ReleaseError::Invalid(
                "metadata.yaml: apiVersion/kind must be clusterctl.cluster.x-k8s.io/v1alpha3 Metadata".into(),
            ));
        }
        if m.release_series.is_empty() {
            return Err(ReleaseError::Invalid("metadata.yaml: no releaseSeries".into()));
        }
        Ok(m)
    }

    /// The series of `version` (`v0.11.0`, `0.11.2-rc.1`).
    pub fn series_for(&self, version: &str) -> Result<&ReleaseSeries, ReleaseError> {
        let (major, minor) = major_minor(version)?;
        self.release_series
            .iter()
            .find(|s| s.major == major && s.minor == minor)
            .ok_or_else(|| {
                ReleaseError::Invalid(format!(
                    "version {version} is not in any release series of metadata.yaml (clusterctl would refuse it)"
                ))
            })
    }
}

/// Major and minor of a `v`-prefixed semantic version.
pub fn major_minor(version: &str) -> Result<(u32, u32), ReleaseError> {
    let bad = || ReleaseError::Invalid(format!("'{version}' is not a version like v0.11.0"));
    let v = version.strip_prefix('v').ok_or_else(bad)?;
    let core = v.split(['-', '+']).next().unwrap_or(v);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    Ok((
        parts[0].parse().map_err(|_| bad())?,
        parts[1].parse().map_err(|_| bad())?,
    ))
}

/// `to` relative to `from` (both absolute), for kustomize, which refuses absolute bases.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to_c: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to_c).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to_c[common..] {
        rel.push(c);
    }
    rel
}

/// Renders `config/default` of `repo` with `image` stamped on the manager.
pub fn render_components(repo: &Path, image: &Image, kubectl: &Path) -> Result<String, ReleaseError> {
    let repo = std::fs::canonicalize(repo).map_err(io(repo))?;
    let dir = tempfile_dir()?;
    let base = relative(&dir, &repo.join("config/default"));
    let mut entry = format!("  - name: {DEFAULT_IMAGE_NAME}\n    newName: {}\n", image.name);
    if let Some(t) = &image.tag {
        entry.push_str(&format!("    newTag: \"{t}\"\n"));
    }
    if let Some(d) = &image.digest {
        entry.push_str(&format!("    digest: \"{d}\"\n"));
    }
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\nimages:\n{entry}",
        base.display()
    );
    let file = dir.join("kustomization.yaml");
    std::fs::write(&file, kustomization).map_err(io(&file))?;
    let result = Command::new(kubectl).arg("kustomize").arg(&dir).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = result.map_err(|e| ReleaseError::Kustomize(format!("running {}: {e}", kubectl.display())))?;
    if !out.status.success() {
        return Err(ReleaseError::Kustomize(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| ReleaseError::Kustomize(e.to_string()))?;
    let got = manager_image(&text)?;
    if got != image.reference() {
        return Err(ReleaseError::Invalid(format!(
            "the manager runs {got}, not {}",
            image.reference()
        )));
    }
    Ok(text)
}

fn tempfile_dir() -> Result<PathBuf, ReleaseError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("capmox-release-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    Ok(dir)
}

/// The documents of a multi-document YAML text as JSON values.
pub fn documents(text: &str) -> Result<Vec<Value>, ReleaseError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| ReleaseError::Invalid(format!("YAML: {e}")))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The image of the `manager` container of the components' Deployment.
pub fn manager_image(components: &str) -> Result<String, ReleaseError> {
    documents(components)?
        .iter()
        .filter(|d| d["kind"] == "Deployment")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|c| c["name"] == "manager")
        .and_then(|c| c["image"].as_str().map(str::to_owned))
        .ok_or_else(|| ReleaseError::Invalid("no Deployment with a container named manager".into()))
}

/// The annotation telling the Cluster API Operator that `binaryData.components` is gzip.
pub const COMPRESSED_ANNOTATION: &str = "provider.cluster.x-k8s.io/compressed";

/// gzip of `data` (what the operator's `decompressData` reads).
pub fn gzip(data: &[u8]) -> Result<Vec<u8>, ReleaseError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data)
        .and_then(|()| enc.finish())
        .map_err(|e| ReleaseError::Invalid(format!("compressing the components: {e}")))
}

/// The Cluster API Operator's form of a release: a ConfigMap named after the version, labelled
/// so that an `InfrastructureProvider` named `proxmox` with `fetchConfig.selector.matchLabels` on
/// these labels finds it; `metadata` in `data` (the operator always reads it there), the
/// components gzip-compressed in `binaryData.components` with the annotation
/// `provider.cluster.x-k8s.io/compressed: "true"` (a ConfigMap holds at most 1 MiB).
pub fn operator_config_map(
    version: &str,
    metadata: &str,
    components: &str,
) -> Result<ConfigMap, ReleaseError> {
    let labels = BTreeMap::from([
        (
            "provider.cluster.x-k8s.io/name".to_owned(),
            PROVIDER_NAME.to_owned(),
        ),
        (
            "provider.cluster.x-k8s.io/type".to_owned(),
            "infrastructure".to_owned(),
        ),
        ("provider.cluster.x-k8s.io/version".to_owned(), version.to_owned()),
    ]);
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(version.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                COMPRESSED_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("metadata".to_owned(), metadata.to_owned())])),
        binary_data: Some(BTreeMap::from([(
            "components".to_owned(),
            ByteString(gzip(components.as_bytes())?),
        )])),
        ..ConfigMap::default()
    })
}

/// A template file as a series of `contract` ships it: unchanged for v1beta2, converted to the
/// v1beta1 generation for v1beta1 (anything that conversion would lose is an error).
pub fn template_for_contract(text: &str, name: &str, contract: &str) -> Result<String, ReleaseError> {
    match contract {
        "v1beta2" => Ok(text.to_owned()),
        "v1beta1" => {
            let out = crate::convert::convert_text_to(text, name, crate::convert::Generation::V1beta1)
                .map_err(|e| ReleaseError::Invalid(format!("{name}: to v1beta1: {e}")))?;
            // A comment on a field v1beta1 does not have goes with it; anything else is data.
            match out.warnings.iter().find(|w| !w.contains(": comment on ")) {
                Some(w) => Err(ReleaseError::Invalid(format!(
                    "{name}: the v1beta1 templates would lose something: {w}"
                ))),
                None => Ok(out.output),
            }
        }
        other => Err(ReleaseError::Invalid(format!(
            "{name}: no templates for contract {other}"
        ))),
    }
}

/// `templates/cluster-template*.yaml` and `templates/clusterclass-*.yaml`, sorted.
pub fn template_files(repo: &Path) -> Result<Vec<PathBuf>, ReleaseError> {
    let dir = repo.join("templates");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(io(&dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".yaml")
                && (name.starts_with("cluster-template") || name.starts_with("clusterclass-"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// What `make release` asks for.
#[derive(Debug, Clone)]
pub struct ReleaseOptions {
    /// The repository root.
    pub repo: PathBuf,
    /// The output folder (created).
    pub out: PathBuf,
    /// The release version (`v0.11.0`).
    pub version: String,
    /// The image the components run.
    pub image: Image,
    /// The kubectl binary.
    pub kubectl: PathBuf,
}

/// Writes the release folder; returns the files written.
pub fn write_release(o: &ReleaseOptions) -> Result<Vec<PathBuf>, ReleaseError> {
    let metadata_path = o.repo.join("metadata.yaml");
    let metadata = std::fs::read_to_string(&metadata_path).map_err(io(&metadata_path))?;
    let contract = Metadata::parse(&metadata)?
        .series_for(&o.version)?
        .contract
        .clone();
    let components = render_components(&o.repo, &o.image, &o.kubectl)?;
    // Everything clusterctl substitutes must parse; a typo would only show at `clusterctl init`.
    super::envsubst::Template::parse(&components)
        .map_err(|e| ReleaseError::Invalid(format!("infrastructure-components.yaml: {e}")))?;
    std::fs::create_dir_all(&o.out).map_err(io(&o.out))?;
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> Result<(), ReleaseError> {
        let p = o.out.join(name);
        std::fs::write(&p, text).map_err(io(&p))?;
        written.push(p);
        Ok(())
    };
    write("infrastructure-components.yaml", &components)?;
    write("metadata.yaml", &metadata)?;
    for t in template_files(&o.repo)? {
        let source = std::fs::read_to_string(&t).map_err(io(&t))?;
        let name = t
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let text = template_for_contract(&source, &name, &contract)?;
        super::envsubst::Template::parse(&text)
            .map_err(|e| ReleaseError::Invalid(format!("{}: {e}", t.display())))?;
        write(&name, &text)?;
    }
    let cm = operator_config_map(&o.version, &metadata, &components)?;
    let yaml = serde_saphyr::to_string(&cm).map_err(|e| ReleaseError::Invalid(e.to_string()))?;
    write(&format!("operator-components-{}.yaml", o.version), &yaml)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn image_references() {
        let i = Image::parse("ghcr.io/capmox-rs/capmox-rs:v0.11.0").unwrap();
        assert_eq!(
            (i.name.as_str(), i.tag.as_deref()),
            ("ghcr.io/capmox-rs/capmox-rs", Some("v0.11.0"))
        );
        let i = Image::parse("localhost:5000/capmox@sha256:abc").unwrap();
        assert_eq!(i.name, "localhost:5000/capmox");
        assert_eq!(i.tag, None);
        assert_eq!(i.digest.as_deref(), Some("sha256:abc"));
        assert_eq!(i.reference(), "localhost:5000/capmox@sha256:abc");
        assert!(Image::parse("repo:").is_err());
        assert!(Image::parse("a b").is_err());
    }

    #[test]
    fn versions_and_series() {
        assert_eq!(major_minor("v0.11.2").unwrap(), (0, 11));
        assert_eq!(major_minor("v1.0.0-rc.1").unwrap(), (1, 0));
        assert!(major_minor("0.11.0").is_err());
        assert!(major_minor("v0.11").is_err());
        let m = Metadata::parse(
            "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n  - {major: 0, minor: 10, contract: v1beta1}\n",
        )
        .unwrap();
        assert_eq!(m.series_for("v0.10.3").unwrap().contract, "v1beta1");
        assert!(m.series_for("v0.12.0").is_err());
        assert!(Metadata::parse("apiVersion: x\nkind: Metadata\nreleaseSeries: []\n").is_err());
    }

    #[test]
    fn relative_paths_for_kustomize() {
        assert_eq!(
            relative(Path::new("/tmp/a/b"), Path::new("/work/repo/config/default")),
            PathBuf::from("../../../work/repo/config/default")
        );
    }

    #[test]
    fn operator_config_map_shape() {
        let cm = operator_config_map("v0.11.0", "meta", "comp").unwrap();
        let v = serde_json::to_value(&cm).unwrap();
        assert_eq!(v["metadata"]["name"], "v0.11.0");
        assert_eq!(
            v["metadata"]["labels"]["provider.cluster.x-k8s.io/name"],
            "proxmox"
        );
        assert_eq!(
            v["metadata"]["labels"]["provider.cluster.x-k8s.io/type"],
            "infrastructure"
        );
        assert_eq!(
            v["metadata"]["labels"]["provider.cluster.x-k8s.io/version"],
            "v0.11.0"
        );
        assert_eq!(v["metadata"]["annotations"][COMPRESSED_ANNOTATION], "true");
        assert_eq!(v["data"]["metadata"], "meta");
        assert!(v["data"].get("components").is_none());
        let packed = cm.binary_data.unwrap()["components"].0.clone();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&packed[..]), &mut text).unwrap();
        assert_eq!(text, "comp");
    }
}
