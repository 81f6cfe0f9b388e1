//! Codec benchmarks (written below).
fn main() {}
