//! Tests against a scripted broker (`common::fake_broker`): what a real
//! broker cannot show on demand (timeouts, redirects, sudden death,
//! keepalive expiry, error answers). Everything runs in memory with tokio's
//! clock paused, so a 30 s timeout takes no real time. One binary, so the
//! suite links once.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod chunks;
mod connection;
mod consume;
mod dead_letter;
mod discovery;
mod flood;
mod handshake;
mod hostile;
mod hostile_counts;
mod hostile_entries;
mod kit;
mod limits;
mod lookup;
#[cfg(feature = "oauth2")]
mod oauth2;
mod observe;
mod produce;
mod reader;
mod redrive;
mod service_hosts;
#[cfg(feature = "tls")]
mod tls_downgrade;
mod transaction_chunks;
mod transactions;
mod unreadable;
