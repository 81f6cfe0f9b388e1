//! Consuming: the pure pieces of a consumer, driven by a task that does the IO.
//!
//! [`ConsumerCore`] is the delivery state machine: it takes broker messages
//! and application calls with the current time and queues the [`Action`]s
//! (flow, ack, redeliver, rewind, dead-letter forward) a driver carries out.
//! Around it sit the ack-timeout tracker ([`unacked`]), the nack policy
//! ([`nack`]), the dead-letter and retry-letter policy ([`dead_letter`]),
//! and receiver-queue accounting. None of them awaits, sleeps or reads the
//! clock, so they are tested like arithmetic, with `t0 + Duration`.

mod actions;
mod batch_acks;
mod config;
mod core;
pub mod dead_letter;
mod error;
mod id_index;
pub mod nack;
mod permits;
mod tick;
mod tick_lists;
pub mod unacked;

#[cfg(test)]
mod core_tests;
#[cfg(test)]
mod core_tests_batch_dlq;
#[cfg(test)]
mod proptests;

pub use self::core::ConsumerCore;
pub use actions::{Action, Incoming};
pub use config::{CoreConfig, SubscriptionType};
pub use dead_letter::{DeadLetterCutoff, DeadLetterPolicy};
pub use error::{ConfigError, CoreError};
pub use nack::{NackPolicy, RedeliveryBackoff};
pub use unacked::UnackedTracker;
