//! planwire's OS sandbox: a process tree that may read and execute anywhere, and write only
//! beneath the [`Writable`] entries of its policy. Everything else is refused by the kernel
//! (`EACCES`); the network stays open.
//!
//! The policy is data, and it comes from the caller: this crate knows paths and the OS, and
//! nothing of planners, of the server or of its protocol (planwire's server lists where each
//! planner's CLI may write, and why, in that planner's adapter). It is the lowest crate of the
//! sandbox, so the compiler keeps that direction.
//!
//! Use:
//! 1. In the parent, [`support`] says whether the OS offers the sandbox, and [`build`] turns
//!    the policy into a [`Restriction`] (creating the entries that are missing first).
//! 2. In the child, between fork and exec, [`enter`] applies it, for good. It is
//!    async-signal-safe (two syscalls on Linux: `PR_SET_NO_NEW_PRIVS` and
//!    `landlock_restrict_self`), and everything the child starts inherits the restriction.
//!
//! # Platforms
//!
//! One file per OS, each with the same three functions (`abi`, `build`, `enter`) and a
//! `Restriction`: `linux.rs` (Landlock, through the `landlock` crate) and `unsupported.rs`
//! (every other OS: no sandbox, [`support`] says why). macOS (Seatbelt, through
//! `/usr/bin/sandbox-exec`) and Windows will each be added as one more file by a later change.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
use unsupported as os;

mod policy;

use std::path::PathBuf;
use std::sync::OnceLock;

pub use os::{enter, Restriction};
pub use policy::{Kind, Writable};

/// Test-only switch: set to `1`, the sandbox behaves as on a kernel without Landlock.
pub const TEST_NO_LANDLOCK: &str = "PLANWIRE_TEST_NO_LANDLOCK";

/// The sandbox this OS offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The mechanism's version: the Landlock ABI on Linux.
    pub version: u32,
}

impl std::fmt::Display for Support {
    /// The mechanism and its version: `Landlock ABI 7`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", os::NAME, self.version)
    }
}

/// Why a restriction could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A policy entry was missing and could not be created.
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    /// The OS has no sandbox, or refused to build this one (in its own words).
    #[error("{0}")]
    Os(String),
}

/// What the OS offers, or why there is no sandbox. Asked once per process.
pub fn support() -> &'static Result<Support, String> {
    static SUPPORT: OnceLock<Result<Support, String>> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        if std::env::var_os(TEST_NO_LANDLOCK).is_some_and(|v| v == "1") {
            return Err(format!(
                "{TEST_NO_LANDLOCK}=1 simulates a kernel without Landlock (test-only)"
            ));
        }
        os::abi().map(|version| Support { version })
    })
}

/// The restriction that lets a process write only beneath `writable`, built in the parent.
/// Entries that do not exist yet are created first (a rule needs an existing path):
/// directories private to the user, a missing file with its initial content.
pub fn build(writable: &[Writable]) -> Result<Restriction, Error> {
    if let Err(why) = support() {
        return Err(Error::Os(why.clone()));
    }
    policy::create_missing(writable)?;
    os::build(writable).map_err(Error::Os)
}
