//! Interoperability with the official client (PyPI `pulsar-client`, the
//! C++ client underneath). One binary, so the suite links once.

#[path = "../common/mod.rs"]
mod common;

mod captures;
mod chunks;
mod consume;
mod dead_letter;
mod encryption;
mod produce;
// JSON and Avro values (`avro` brings `json`); `cli` brings both.
#[cfg(feature = "avro")]
mod schema;
