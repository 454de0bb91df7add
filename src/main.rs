use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = switchboard::cli::Cli::parse();
    match switchboard::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<switchboard::cli::Exit>().is_some() => {
            let code = e
                .downcast_ref::<switchboard::cli::Exit>()
                .map_or(1, |x| x.0);
            std::process::ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("switchboard: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
