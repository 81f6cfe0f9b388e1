//! `pulsar_wire::fuzzing::batch`: see its documentation for the input format.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pulsar_wire::fuzzing::batch(data));
