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
#[allow(dead_code)] // used by the driver (task.rs), next commit
mod builder;
mod config;
mod consumer_error;
mod core;
pub mod dead_letter;
mod error;
mod id_index;
mod message;
pub mod nack;
mod permits;
#[allow(dead_code)] // used by the driver (task.rs), next commit
mod receive;
#[allow(dead_code)] // used by the driver (task.rs), next commit
mod subscribe;
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

pub use builder::{ConsumerBuilder, DEFAULT_RECEIVER_QUEUE_SIZE};
pub use consumer_error::ConsumerError;
pub use message::Message;
pub use receive::UnpackError;
pub use subscribe::{HashRange, InitialPosition, KeySharedPolicy};
