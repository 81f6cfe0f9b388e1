#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod clock;
pub mod codec;
pub mod consumer;
mod error;
pub mod ids;
pub mod message_id;
pub mod proto;
pub mod wire;

pub use error::{Error, Result};
pub use message_id::MessageId;
