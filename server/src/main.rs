//! The `planwire` binary: `planwire --stdio` serves the protocol on stdin/stdout (the
//! default); `plan`, `tickets`, `show` and `doctor` are the terminal front (`cli`);
//! `planwire replay SCRIPT` is the `script` planner's child process.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "planwire",
    version,
    about = "Plans tickets with a coding-agent CLI in read-only plan mode",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Serve JSON-RPC (LSP framing) on stdin/stdout. This is the default.
    #[arg(long)]
    stdio: bool,
    /// Log level for stderr (error, warn, info, debug, trace); else PLANWIRE_LOG, else info
    /// (warn for the terminal commands).
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Terminal(planwire::cli::Command),
    /// Replay a recorded planner stream (a built-in name or a script file) as the `script` planner.
    Replay {
        /// A built-in script (demo, slow, questions, fail) or the path of a script file.
        script: String,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Replay { script }) => planwire::planners::script::replay(&script),
        Some(Command::Terminal(command)) => {
            let log = planwire::cli::init_logging(cli.log_level.as_deref(), "warn");
            planwire::cli::run(command, log)
        }
        None => {
            planwire::cli::init_logging(cli.log_level.as_deref(), "info");
            serve_stdio()
        }
    };
    // The blocking stdin reader would keep the runtime from shutting down: leave now.
    std::process::exit(code);
}

fn serve_stdio() -> i32 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async {
        let stdin = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        planwire::server::serve(stdin, tokio::io::stdout()).await
    });
    // The stdin reader is a blocking read that never returns while the client keeps the pipe
    // open; dropping the runtime would wait for it forever. Leave it behind.
    runtime.shutdown_background();
    code
}
