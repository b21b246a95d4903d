//! End-to-end tests: the real `planwire` binary over stdio, a real SQLite file, real child
//! processes (the `script` planner and fake CLIs that replay real recordings).

mod harness;

mod initiative;

mod bad_input;
mod claude_cli;
mod crash;
mod lifecycle;
mod memory;
mod planning;
mod pressure;
mod questions;
mod realcli;
mod realcli_codex;
mod realcli_opencode;
mod recovery;
mod stop;
mod storage;
mod terminal;
