//! `make chart`: regenerates the templates of the Helm chart `charts/capmox-rs` from the kustomize
//! source of the clusterctl components. See `capmox::packaging::chart`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Regenerates `charts/capmox-rs/templates/*` (all but the hand-written helpers) from `config/`.
#[derive(Debug, Parser)]
#[command(name = "capmox-chart", about)]
struct Args {
    /// The chart folder.
    #[arg(long, default_value = "charts/capmox-rs")]
    chart: PathBuf,
    /// Repository root.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// kubectl binary (its built-in kustomize renders config/default and config/optional).
    #[arg(long, env = "KUBECTL", default_value = "kubectl")]
    kubectl: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match capmox::packaging::chart::write_chart(&args.repo, &args.chart, &args.kubectl) {
        Ok(files) => {
            for f in files {
                println!("  {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("capmox-chart: {e}");
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
