//! The process shell: argv → logging on stderr → `server::serve(stdin, stdout)`. Exit codes
//! live here only.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use ecs_elastic_agent::server::{serve, ServeOptions};
use tokio::io::BufReader;

/// GoCD elastic agents on AWS ECS (Fargate and EC2).
///
/// A GoCD-compatible server starts this binary as a child process and speaks the elastic-agent
/// extension v5 to it over stdio, one JSON message a line. Logs go to stderr.
#[derive(Debug, Parser)]
#[command(version, about, long_about, after_help = "Examples:\n  ecs-elastic-agent serve\n  RUST_LOG=debug ecs-elastic-agent --log-format json serve")]
struct Cli {
    /// Log format on stderr; levels come from RUST_LOG (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Speak the plugin protocol on stdin/stdout (what runs when no command is given).
    #[command(after_help = "Example:\n  ecs-elastic-agent serve < requests.jsonl")]
    Serve,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(run_server()),
    }
}

async fn run_server() -> ExitCode {
    let input = BufReader::with_capacity(256 * 1024, tokio::io::stdin());
    let result = serve(input, tokio::io::stdout(), ServeOptions::default(), shutdown_signal()).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "writing to stdout failed");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("could not install signal handlers; only EOF on stdin stops the plugin");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}
