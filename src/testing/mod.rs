//! A test kit: an in-process Pulsar broker for unit tests of code that
//! produces and consumes (feature `testing`).
//!
//! See `docs/testing-kit.md`.

mod broker;
pub(crate) mod model;
mod record;
mod simulation;

pub use broker::TestBroker;
pub use record::{Event, EventKind, StoredMessage};
pub use simulation::{BadFault, Fault, FaultKind, Report, Simulation};
