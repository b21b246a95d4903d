//! JSON-RPC message decoding, and the params of every method.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| planwire::fuzzing::jsonrpc(data));
