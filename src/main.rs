use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = switchboard::cli::Cli::parse();
    match switchboard::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
