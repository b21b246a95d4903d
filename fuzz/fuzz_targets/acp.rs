//! An ACP agent's `session/update` notifications, through the turn mapper with its state
//! carried across lines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::acp_lines(data));
