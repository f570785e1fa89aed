//! Writes the webhook manifests generated from `capmox_api::webhook` below a `config/` directory
//! (default `config/`): `webhook/{manifests,service,kustomization,kustomizeconfig}.yaml` and
//! `crd/patches/{webhook,cainjection}_in_<plural>.yaml`.
//!
//! Usage: `manifestgen [CONFIG_DIR]` — `make manifests` runs it after `crdgen`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("config"), PathBuf::from);
    match capmox_api::webhook::manifests::write_all(&dir) {
        Ok(paths) => {
            for path in paths {
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("manifestgen: {err}");
            ExitCode::FAILURE
        }
    }
}
