//! Reading CRDs from YAML and installing them (both modes).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::{Error, Result};

fn yaml_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let rd = std::fs::read_dir(path).map_err(|e| Error::Io(format!("reading {}", path.display()), e))?;
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Parses every YAML document of `text` as a JSON value, skipping empty documents.
pub fn parse_documents(text: &str, origin: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| Error::Parse(origin.to_string(), e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Reads the CRDs in a YAML file or folder (other kinds are skipped).
pub fn read_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let mut out = Vec::new();
    for f in yaml_files(path)? {
        let text =
            std::fs::read_to_string(&f).map_err(|e| Error::Io(format!("reading {}", f.display()), e))?;
        for doc in parse_documents(&text, &f.display().to_string())? {
            if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd: CustomResourceDefinition = serde_json::from_value(doc)
                .map_err(|e| Error::Parse(f.display().to_string(), e.to_string()))?;
            out.push(crd);
        }
    }
    Ok(out)
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"))
}

/// Creates (or replaces) the CRDs, then waits until each is established and its served versions appear
/// in discovery.
pub async fn install(client: &kube::Client, list: Vec<CustomResourceDefinition>) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for mut crd in list.clone() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crd.metadata.resource_version = None;
        crd.status = None;
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let current = api.get(&name).await?;
                crd.metadata.resource_version = current.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &crd).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for crd in &list {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            let current = api.get(&name).await?;
            let mut ready = established(&current);
            if ready {
                for v in current.spec.versions.iter().filter(|v| v.served) {
                    let gv = format!("{}/{}", current.spec.group, v.name);
                    let served = client
                        .list_api_group_resources(&gv)
                        .await
                        .is_ok_and(|l| l.resources.iter().any(|r| r.name == current.spec.names.plural));
                    ready &= served;
                }
            }
            if ready {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!("CRD {name} not established")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
