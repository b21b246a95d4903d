//! `codex app-server`'s messages, through its event mapper with its state carried across
//! lines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::codex_lines(data));
