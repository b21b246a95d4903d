//! The NDJSON codec (ACP peers, codex app-server) over arbitrary byte streams.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::ndjson_lines(data));
