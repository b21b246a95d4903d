//! Every OS but Linux, for now: no sandbox ([`crate::support`] says so). A port adds a file
//! of the same shape for its OS (Seatbelt on macOS, an AppContainer or restricted token on
//! Windows) and takes its OS out of this one's `cfg` in `lib.rs`.

use std::io;

use crate::Writable;

/// The mechanism, as [`Support`](crate::Support) names it.
pub const NAME: &str = "sandbox";

/// Never built on this OS.
#[derive(Debug, Clone)]
pub enum Restriction {}

/// Why there is none.
pub fn abi() -> Result<u32, String> {
    Err(format!("planwire has no sandbox for {} yet", std::env::consts::OS))
}

pub fn build(_writable: &[Writable]) -> Result<Restriction, String> {
    abi().map(|_| unreachable!())
}

/// Never called: there is no [`Restriction`] to enter.
pub fn enter(r: &Restriction) -> io::Result<()> {
    match *r {}
}
