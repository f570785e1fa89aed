//! Starts a control plane (in-tree, or real binaries when `KUBEBUILDER_ASSETS` is set) and prints
//! the kubeconfig path; runs until Ctrl-C or SIGTERM, then tears it down (real processes included).

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = testenv::TestEnv::start().await?;
    println!("{}", env.kubeconfig_path().display());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    drop(env);
    Ok(())
}
