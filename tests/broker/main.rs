//! Tests against a real broker (pulsar-lite, started per test). One binary,
//! so the suite links once.

#[path = "../common/mod.rs"]
mod common;

mod access_modes;
mod auth;
mod client;
mod consume;
mod deduplication;
mod observe;
mod produce;
mod raw_reader;
mod resilience;
mod resources;
// JSON and Avro values (`avro` brings `json`); `cli` brings both.
#[cfg(feature = "avro")]
mod schema;
mod secured;
mod service_url;
#[cfg(feature = "tls")]
mod tls;
mod topics_change;
mod transactions;
mod wire;
