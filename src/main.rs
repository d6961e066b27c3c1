//! The process shell: argv → logging on stderr (and traces, when asked) →
//! `server::serve(stdin, stdout)` or one of the
//! operators' tools (`cli`). Exit codes live here only: 0 success, 1 a problem found or a failure,
//! 2 bad arguments (clap); `try` exits with the status of its class of failure
//! (`cli::trial::class::Class::status`).

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use ecs_elastic_agent::cli::{self, Cli, Command, LogFormat, ServeArgs};
use ecs_elastic_agent::cluster::EngineOptions;
use ecs_elastic_agent::metrics::{self, Metrics};
use ecs_elastic_agent::plugin::PluginOptions;
use ecs_elastic_agent::server::{serve, ServeOptions};
use ecs_elastic_agent::telemetry::{self, Telemetry};
use tokio::io::BufReader;

/// mimalloc rather than glibc's malloc: with tokio's worker threads freeing what others
/// allocated, glibc's arenas cost a fifth of a cheap request's time in lock handoffs and keep
/// more freed memory resident. Built with `no_thp`: asking the kernel for transparent huge
/// pages in its arenas made a half-used 2 MiB page resident at a time, 12 MiB of a 42 MiB
/// process with 5,000 agents (README "Performance").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve(ServeArgs::default()));
    // The tools answer on stdout; their logs stay quiet unless RUST_LOG asks. The SDK's own
    // credential-chain warnings (a raw provider error for each source it tried) would repeat,
    // unreadably, what `doctor`'s credentials line already says with its fix.
    // `serve` sets its logging up with its traces.
    if !matches!(command, Command::Serve(_)) {
        init_logging(cli.log_format, "warn,aws_config=error", None);
    }
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let result = match command {
        Command::Serve(args) => return with_runtime(|rt| serve_with_traces(rt, cli.log_format, args)),
        Command::Validate(args) => cli::validate::run(&args, &mut stdout.lock()),
        Command::Import(args) => {
            return with_runtime(|rt| exit_code(rt.block_on(cli::import::run(&args, &mut stdout.lock()))));
        }
        Command::IamPolicy(args) => cli::iam::run(&args, &mut stdout.lock(), &mut stderr.lock()),
        Command::Profile(args) => {
            return with_runtime(|rt| {
                exit_code(rt.block_on(cli::profile::run(&args, &mut stdout.lock(), &mut stderr.lock())))
            });
        }
        Command::Doctor(args) => {
            return with_runtime(|rt| exit_code(rt.block_on(cli::doctor::run(&args, &mut stdout.lock()))));
        }
        Command::Try(args) => {
            return with_runtime(|rt| match rt.block_on(cli::trial::run(&args, &mut stdout.lock())) {
                Ok(class) => ExitCode::from(class.status()),
                Err(e) => exit_code(Err(e)),
            });
        }
        Command::Leftovers(args) => {
            return with_runtime(|rt| exit_code(rt.block_on(cli::leftovers::run(&args, &mut stdout.lock()))));
        }
        Command::Prices(args) => {
            return with_runtime(|rt| exit_code(rt.block_on(cli::prices::run(&args, &mut stdout.lock()))));
        }
    };
    exit_code(result)
}

fn exit_code(result: std::io::Result<bool>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "ecs-elastic-agent: could not write the answer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn with_runtime(run: impl FnOnce(&tokio::runtime::Runtime) -> ExitCode) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => {
            let code = run(&rt);
            // A blocked stdin read lives on a blocking thread that would hold a plain drop of the
            // runtime forever (after SIGTERM stdin is still open): everything that matters is
            // done and flushed by now, so do not wait for it.
            rt.shutdown_timeout(std::time::Duration::from_millis(100));
            code
        }
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            ExitCode::FAILURE
        }
    }
}

/// `serve`, with traces when the `OTEL_*` variables ask for them (`telemetry`): the exporter is
/// set up on the runtime before the logs (whose OpenTelemetry layer turns the AWS calls' spans
/// into spans of the jobs' traces), and sends what it still holds before the process exits.
fn serve_with_traces(rt: &tokio::runtime::Runtime, format: LogFormat, args: ServeArgs) -> ExitCode {
    let telemetry = {
        let _in_runtime = rt.enter();
        Telemetry::from_env()
    };
    let tracer = telemetry.as_ref().ok().and_then(|t| t.as_ref().map(Telemetry::tracer));
    init_logging(format, "info", tracer);
    let telemetry = match telemetry {
        Ok(telemetry) => telemetry,
        Err(e) => {
            tracing::warn!(error = %e, "running without traces");
            None
        }
    };
    if telemetry.is_some() {
        tracing::info!("sending traces over OTLP (OTEL_EXPORTER_OTLP_*)");
    }
    let code = rt.block_on(on_a_worker(run_server(args)));
    if let Some(telemetry) = telemetry {
        rt.block_on(telemetry.shutdown());
    }
    code
}

/// Runs `serve` as a task on a runtime worker rather than on the thread that called `block_on`:
/// the requests it spawns then start on the same worker and free their memory where it was
/// allocated, instead of each waking a worker from outside and contending for the allocator
/// (README "Performance").
async fn on_a_worker(serve: impl std::future::Future<Output = ExitCode> + Send + 'static) -> ExitCode {
    tokio::spawn(serve).await.unwrap_or(ExitCode::FAILURE)
}

async fn run_server(args: ServeArgs) -> ExitCode {
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = args.metrics_addr {
        match start_metrics(addr, metrics.clone()).await {
            Ok(bound) => {
                tracing::info!(address = %format!("http://{bound}/metrics"), "serving metrics")
            }
            Err(e) => {
                tracing::error!(%addr, error = %e, "could not listen for metrics");
                return ExitCode::FAILURE;
            }
        }
    }
    let engine = EngineOptions { task_definition_sweep_after: args.task_definition_sweep_after };
    let options = ServeOptions { plugin: PluginOptions { metrics, engine }, ..ServeOptions::default() };
    let (input, output) = stdio();
    let input = BufReader::with_capacity(256 * 1024, input);
    let result = serve(input, output, options, shutdown_signal()).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "writing to stdout failed");
            ExitCode::FAILURE
        }
    }
}

type Input = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
type Output = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// stdin and stdout for the server. When they are pipes (as a host starts the plugin) they are
/// read and written on the runtime's event loop, by the task that awaits them; otherwise (a
/// terminal, a file) through tokio's stdin and stdout, which hand every read and write to a
/// blocking thread — a thread hop per line, several times slower (README "Performance").
fn stdio() -> (Input, Output) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input: Input = match std::io::stdin().as_fd().try_clone_to_owned().and_then(pipe::Receiver::from_owned_fd) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let output: Output = match std::io::stdout().as_fd().try_clone_to_owned().and_then(pipe::Sender::from_owned_fd) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

async fn start_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(metrics::serve_http(listener, metrics));
    Ok(bound)
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

/// Logs on stderr at `RUST_LOG`'s levels (else `default_level`), and, given a tracer, the spans
/// of target [`telemetry::SPAN_TARGET`] to OpenTelemetry whatever `RUST_LOG` says (each output
/// has its own filter; the cap on the SDK's and HTTP stack's verbosity, [`allowed`], holds for
/// both).
fn init_logging(format: LogFormat, default_level: &str, tracer: Option<opentelemetry_sdk::trace::SdkTracer>) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, EnvFilter, Layer};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // Colours only on a terminal: a host keeps the plugin's stderr in a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = match format {
        LogFormat::Text => fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed(),
        LogFormat::Json => {
            fmt::layer().json().with_current_span(true).with_writer(std::io::stderr).with_ansi(ansi).boxed()
        }
    };
    let traces = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(Targets::new().with_target(telemetry::SPAN_TARGET, tracing::Level::INFO))
    });
    tracing_subscriber::registry()
        .with(tracing_subscriber::filter::filter_fn(allowed))
        .with(logs.with_filter(filter))
        .with(traces)
        .init();
}

/// Targets of the SDK, the HTTP stack and TLS, and the most verbose level they may log whatever
/// `RUST_LOG` says. At trace they print signed requests, headers and session tokens;
/// the SDK's endpoint and auth resolution and its credential providers (AssumeRole) print the
/// access key id at debug already, so those stop at info. The first matching prefix wins.
const CAPPED: &[(&str, tracing::Level)] = &[
    ("aws_smithy_runtime::client::orchestrator::endpoints", tracing::Level::INFO),
    ("aws_smithy_runtime::client::orchestrator::auth", tracing::Level::INFO),
    ("aws_config", tracing::Level::INFO),
    ("aws_", tracing::Level::DEBUG),
    ("hyper", tracing::Level::DEBUG),
    ("h2", tracing::Level::DEBUG),
    ("rustls", tracing::Level::DEBUG),
    ("tower", tracing::Level::DEBUG),
    ("http", tracing::Level::DEBUG),
    // The OTLP exporter's own logs: at debug they may show its configuration (headers).
    ("opentelemetry", tracing::Level::INFO),
    ("tonic", tracing::Level::DEBUG),
];

fn allowed(meta: &tracing::Metadata<'_>) -> bool {
    CAPPED.iter().find(|(prefix, _)| meta.target().starts_with(prefix)).is_none_or(|(_, max)| meta.level() <= max)
}
