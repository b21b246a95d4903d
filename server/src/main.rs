//! The `planwire` binary: `planwire --stdio` serves the protocol on stdin/stdout;
//! `planwire replay SCRIPT` is the `script` planner's child process.

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "planwire",
    version,
    about = "Plans tickets with a coding-agent CLI in read-only plan mode"
)]
struct Cli {
    /// Serve JSON-RPC (LSP framing) on stdin/stdout. This is the default.
    #[arg(long)]
    stdio: bool,
    /// Log level for stderr (error, warn, info, debug, trace); else PLANWIRE_LOG, else info.
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Replay a recorded planner stream (a built-in name or a script file) as the `script` planner.
    Replay {
        /// A built-in script (demo, slow, questions, fail) or the path of a script file.
        script: String,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Some(Command::Replay { script }) = &cli.command {
        std::process::exit(planwire::planners::script::replay(script));
    }
    let filter = cli
        .log_level
        .clone()
        .or_else(|| std::env::var("PLANWIRE_LOG").ok())
        .unwrap_or_else(|| "info".into());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async {
        let stdin = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        planwire::server::serve(stdin, tokio::io::stdout()).await
    });
    // The blocking stdin reader would keep the runtime from shutting down: leave now.
    std::process::exit(code);
}
