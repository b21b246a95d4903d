//! The LSP frame reader over arbitrary byte streams.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::frames(data));
