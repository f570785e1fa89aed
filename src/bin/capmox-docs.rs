//! `make docs`: regenerates the book's Reference (`docs/src/reference/`) from the code. See
//! `capmox::packaging::reference`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Regenerates docs/src/reference/ (CRD fields, flags, reasons, metrics).
#[derive(Debug, Parser)]
#[command(name = "capmox-docs", about)]
struct Args {
    /// Repository root.
    #[arg(long, default_value = ".")]
    repo: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let pages = match capmox::packaging::reference::generate(&args.repo) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("capmox-docs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = args.repo.join("docs/src/reference");
    for (name, text) in pages {
        let path = dir.join(&name);
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
            eprintln!("capmox-docs: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("  {}", path.display());
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_is_consistent() {
        super::Args::command().debug_assert();
    }
}
