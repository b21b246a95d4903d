//! `opencode serve`'s event stream, through the SSE decoder and the event mapper with its
//! state carried across events.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::opencode_lines(data));
