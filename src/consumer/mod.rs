//! Consuming: the pure pieces of a consumer, driven by a task that does the IO.
//!
//! The ack-timeout tracker ([`unacked`]), the redelivery policies
//! ([`nack`]) and the dead-letter and retry-letter policy ([`dead_letter`]).
//! None of them awaits, sleeps or reads the clock, so they are
//! tested like arithmetic, with `t0 + Duration`.

pub mod dead_letter;
mod error;
mod id_index;
pub mod nack;
mod tick;
mod tick_lists;
pub mod unacked;

pub use dead_letter::{DeadLetterCutoff, DeadLetterPolicy};
pub use error::ConfigError;
pub use nack::{NackPolicy, RedeliveryBackoff};
pub use unacked::UnackedTracker;
