//! End-to-end tests: the real `planwire` binary over stdio, a real SQLite file, real child
//! processes (the `script` planner and fake CLIs that replay real recordings).

mod harness;

mod initiative;

mod acp_planner;
mod bad_input;
mod claude_cli;
mod codex_cli;
mod context;
mod crash;
mod deltas;
mod lifecycle;
mod living;
mod mcp;
mod mcp_install;
mod memory;
mod planning;
mod pressure;
mod questions;
mod realcli;
mod realcli_acp;
mod realcli_claude_live;
mod realcli_codex;
mod realcli_context;
mod realcli_living;
mod realcli_mcp;
mod realcli_opencode;
mod realcli_opencode_live;
mod realcli_sandbox;
mod recovery;
mod references;
mod sandbox;
mod stop;
mod storage;
mod terminal;
