//! Every OS but Linux, for now: no sandbox (`unavailable`). A port replaces this file with
//! one of the same shape (Seatbelt on macOS, an AppContainer or restricted token on Windows).

use std::io;

use super::policy::Writable;

/// What [`super::describe`] calls the mechanism.
pub const NAME: &str = "sandbox";

/// Never built on this OS.
#[derive(Debug, Clone)]
pub enum Restriction {}

pub fn abi() -> Result<u32, String> {
    Err(format!("planwire has no sandbox for {} yet", std::env::consts::OS))
}

pub fn build(_writable: &[Writable]) -> Result<Restriction, String> {
    abi().map(|_| unreachable!())
}

pub fn enter(r: &Restriction) -> io::Result<()> {
    match *r {}
}
