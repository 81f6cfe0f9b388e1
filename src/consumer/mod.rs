//! Consuming: the pure pieces of a consumer, driven by a task that does the IO.
//!
//! The ack-timeout tracker ([`unacked`]) and the redelivery policies
//! ([`nack`]). None of them awaits, sleeps or reads the clock, so they are
//! tested like arithmetic, with `t0 + Duration`.

mod error;
mod id_index;
pub mod nack;
mod tick;
mod tick_lists;
pub mod unacked;

pub use error::ConfigError;
pub use nack::{NackPolicy, RedeliveryBackoff};
pub use unacked::UnackedTracker;
