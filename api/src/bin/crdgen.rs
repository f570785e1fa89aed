//! Writes the generated CRD YAML into a directory (default `config/crd/bases/`).
//!
//! Usage: `crdgen [DIR]` — `make crds` runs `cargo run -p capmox-api --bin crdgen -- config/crd/bases`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("config/crd/bases"), PathBuf::from);
    match capmox_api::crd::write_all(&dir) {
        Ok(paths) => {
            for path in paths {
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("crdgen: {err}");
            ExitCode::FAILURE
        }
    }
}
