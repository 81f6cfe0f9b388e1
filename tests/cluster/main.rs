//! Tests on a real Apache Pulsar cluster: two brokers, ZooKeeper, a bookie
//! and the Pulsar proxy (`scripts/apache-pulsar cluster start DIR`, with
//! `DIR/env` exported). Lookup redirects, bundles moving between brokers,
//! a broker killed mid-stream, the proxy path, and dead-letter and retry
//! topics on another broker than their source. Without the cluster's env
//! every test prints `SKIPPED` and why.

#[path = "../common/mod.rs"]
mod common;

mod chaos;
mod death;
mod letters;
mod lookup;
mod moves;
mod proxy;
mod traffic;
