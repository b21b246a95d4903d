//! planwire: an editor sidecar that plans tickets with a coding-agent CLI.
//!
//! Data flows one way: planner line → adapter parser → numbered event → store + notify.
//! `transport` frames JSON-RPC, `server` runs the lifecycle and hands each request to its
//! file under `handlers`, and the `runner` drives one planner process through the
//! `supervisor` (inside the OS sandbox: the `planwire-sandbox` crate, prepared for each pass
//! by `sandbox`), recording everything in the `store`. `acp` is planwire as an ACP agent and
//! `mcp` planwire as an MCP server: fronts that are clients of the same server, in-process.

pub mod acp;
pub mod cli;
pub mod config;
pub mod context;
pub mod fuzzing;
pub mod handlers;
pub mod mcp;
pub mod planners;
pub mod progress;
pub mod runner;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod store;
pub mod supervisor;
pub mod transport;
pub mod util;
pub mod worktree;
