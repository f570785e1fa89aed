//! Starts the in-tree server and prints the kubeconfig path; runs until Ctrl-C.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = testenv::TestEnv::start().await?;
    println!("{}", env.kubeconfig_path().display());
    tokio::signal::ctrl_c().await?;
    Ok(())
}
