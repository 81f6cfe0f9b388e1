//! Consuming: subscribe to topics, receive messages, acknowledge them.

#[allow(dead_code)] // used by the driver, which lands with the consumer core
mod builder;
mod consumer_error;
mod message;
#[allow(dead_code)] // used by the driver, which lands with the consumer core
mod receive;
mod sub_type;
#[allow(dead_code)] // used by the driver, which lands with the consumer core
mod subscribe;

pub use builder::{ConsumerBuilder, DEFAULT_RECEIVER_QUEUE_SIZE};
pub use consumer_error::ConsumerError;
pub use message::Message;
pub use receive::UnpackError;
pub use sub_type::SubscriptionType;
pub use subscribe::{HashRange, InitialPosition, KeySharedPolicy};
