//! planwire: an editor sidecar that plans tickets with a coding-agent CLI.
//!
//! Data flows one way: planner line → adapter parser → numbered event → store + notify.
//! `transport` frames JSON-RPC, `handlers` wire requests to the `runner`, which drives one
//! planner process through the `supervisor` and records everything in the `store`.

pub mod planners;
pub mod store;
pub mod supervisor;
pub mod transport;
pub mod util;
