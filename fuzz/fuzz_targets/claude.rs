//! The Claude Code stream-json parser, with its state carried across lines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::claude_lines(data));
