#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
mod clock;
pub mod codec;
pub mod compression;
pub mod connection;
pub mod consumer;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod ids;
pub mod message_id;
pub mod producer;
pub mod proto;
pub mod wire;

pub use client::{Client, ClientBuilder, ClientError, TopicName};
pub use connection::{Connection, ConnectionError};
pub use consumer::{Consumer, ConsumerBuilder, ConsumerError, Message, Reader};
pub use error::{Error, Result};
pub use message_id::MessageId;
