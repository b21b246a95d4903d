//! Plan extraction (and the outline, expansion and research answers) from arbitrary text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::plan_text(data));
