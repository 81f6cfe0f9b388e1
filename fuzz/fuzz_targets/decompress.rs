//! `pulsar_wire::fuzzing::decompress`: see its documentation for the input format.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pulsar_wire::fuzzing::decompress(data));
