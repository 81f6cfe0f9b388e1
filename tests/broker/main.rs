//! Tests against a real broker (pulsar-lite, started per test). One binary,
//! so the suite links once.

#[path = "../common/mod.rs"]
mod common;

mod client;
mod consume;
mod wire;
