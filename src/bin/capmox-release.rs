//! `make release`: writes the release folder (components with the image stamped, metadata,
//! templates, ClusterClasses, the Cluster API Operator ConfigMap). See `capmox::packaging`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use capmox::packaging::release::{self, Image, ReleaseOptions};

/// Builds the clusterctl release folder of capmox-rs.
#[derive(Debug, Parser)]
#[command(name = "capmox-release", about)]
struct Args {
    /// Release version (`v0.11.0`); its series must be in metadata.yaml.
    #[arg(long, env = "RELEASE_VERSION")]
    release_version: String,
    /// Image of the manager (default: ghcr.io/capmox-rs/capmox-rs:<version>).
    #[arg(long, env = "IMG")]
    image: Option<String>,
    /// Output folder.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Repository root.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// kubectl binary (its built-in kustomize renders config/default).
    #[arg(long, env = "KUBECTL", default_value = "kubectl")]
    kubectl: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let image = args
        .image
        .clone()
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| format!("{}:{}", release::DEFAULT_IMAGE_NAME, args.release_version));
    let run = || -> Result<Vec<PathBuf>, release::ReleaseError> {
        let options = ReleaseOptions {
            repo: args.repo.clone(),
            out: args.out.clone(),
            version: args.release_version.clone(),
            image: Image::parse(&image)?,
            kubectl: args.kubectl.clone(),
        };
        release::write_release(&options)
    };
    match run() {
        Ok(files) => {
            println!("release {} (image {image}):", args.release_version);
            for f in files {
                println!("  {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("capmox-release: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_is_consistent() {
        super::Args::command().debug_assert();
    }
}
