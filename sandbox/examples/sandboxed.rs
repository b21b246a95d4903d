//! Runs a command under the sandbox, for a test by hand (see README.md):
//!
//! ```text
//! cargo run -p planwire-sandbox --example sandboxed -- [DIR…] -- PROGRAM [ARG…]
//! ```
//!
//! The command may read and execute anywhere, and write only beneath each DIR (made when
//! missing) and `/dev`.

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    use std::os::unix::process::CommandExt;
    use std::process::ExitCode;

    use planwire_sandbox::Writable;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--");
    let Some((dirs, [program, rest @ ..])) = split.map(|i| (&args[..i], &args[i + 1..])) else {
        eprintln!("usage: sandboxed [DIR…] -- PROGRAM [ARG…]");
        return ExitCode::from(2);
    };
    let mut policy: Vec<Writable> = dirs
        .iter()
        .map(|d| Writable::dir(d.into(), "named on the command line"))
        .collect();
    policy.push(Writable::dir("/dev".into(), "device files"));
    let restriction = match planwire_sandbox::build(&policy) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("no sandbox: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    // SAFETY: `enter` is async-signal-safe (it neither allocates nor locks).
    unsafe {
        command.pre_exec(move || planwire_sandbox::enter(&restriction));
    }
    let e = command.exec();
    eprintln!("cannot run {program}: {e}");
    ExitCode::from(127)
}

#[cfg(not(unix))]
fn main() {
    eprintln!("this example runs on Unix only");
}
