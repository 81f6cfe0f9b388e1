//! Producing messages: the message builder, the batch container, in-flight
//! tracking, partition routing and the bounds on what a producer holds.
//!
//! The parts here are pure (C1): no tokio, no clock reads; the driver task
//! gives them `now` and executes what they return.

// The pure parts are driven by the producer task; until it lands, only the
// tests use some of them.
#![allow(dead_code)]

mod batcher;
mod limits;
mod message;
mod pending;
mod routing;

pub use limits::{DEFAULT_MEMORY_LIMIT, LimitExceeded, WhenFull};
pub use message::{DeliverAt, ProducerMessage};
pub use routing::{HashingScheme, RoutingMode};
