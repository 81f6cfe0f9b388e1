//! The consumer's driver: one task per consumer. It feeds each partition's
//! [`ConsumerCore`] from the connection's mailbox and the handle's commands,
//! keeps one timer (the earliest `next_deadline`), and carries out the
//! actions the cores queue. All delivery decisions live in the cores.
//!
//! `attach.rs` subscribes (and subscribes again), `execute.rs` turns the
//! cores' actions and the handle's requests into commands on the wire.

mod acks;
mod attach;
mod batch;
mod chunked;
mod close_on_drop;
mod command;
mod deliver;
mod discover;
mod driver;
mod events;
mod execute;
mod forward;
mod leave;
mod memory;
mod observe;
mod resubscribe;
mod shelf;
mod txn_acks;

pub(crate) use attach::expand;
pub(crate) use batch::AckOne;
pub(crate) use command::{Activity, Command, TopicsRead, held_at};
pub(crate) use discover::{DEFAULT_CHECK_INTERVAL, DiscoverySettings};
pub(crate) use driver::{Driver, Settings};
pub(crate) use forward::Forwards;
pub(crate) use shelf::{Shelf, Taken};

/// An unbounded channel made when its first sender is: tokio's channel
/// allocates a 512-byte header and room for 32 messages when made, which
/// a consumer that never uses it (most never forward to a dead-letter
/// topic, subscribe again or wait for ack receipts) should not pay.
pub(crate) struct LazyChannel<T> {
    channel: Option<(mpsc::UnboundedSender<T>, mpsc::UnboundedReceiver<T>)>,
}

impl<T> Default for LazyChannel<T> {
    fn default() -> Self {
        Self { channel: None }
    }
}

impl<T> std::fmt::Debug for LazyChannel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyChannel")
            .field("made", &self.channel.is_some())
            .finish()
    }
}

impl<T> LazyChannel<T> {
    /// A sender, the channel made if it is not yet.
    pub(crate) fn sender(&mut self) -> mpsc::UnboundedSender<T> {
        self.made().0.clone()
    }

    fn made(&mut self) -> &mut (mpsc::UnboundedSender<T>, mpsc::UnboundedReceiver<T>) {
        self.channel.get_or_insert_with(mpsc::unbounded_channel)
    }

    /// The next message; pending while the channel is not made (this holds
    /// a sender, so it never ends while made).
    pub(crate) async fn recv(&mut self) -> Option<T> {
        match &mut self.channel {
            Some((_, rx)) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Closes the receiving end, as `mpsc::UnboundedReceiver::close` (made
    /// closed if it was not made, so senders taken later find it closed).
    pub(crate) fn close(&mut self) {
        self.made().1.close();
    }

    /// A message already sent, if any.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        self.channel.as_mut()?.1.try_recv().ok()
    }
}

/// FLOWs held back: (sub index, the consumer id they are for, permits).
type WithheldFlows = Vec<(usize, ConsumerId, u32)>;

/// Adds `permits` for `consumer` (of sub `index`) to the FLOWs held back.
fn withhold_flow(withheld: &mut WithheldFlows, index: usize, consumer: ConsumerId, permits: u32) {
    match withheld
        .iter_mut()
        .find(|(i, c, _)| *i == index && *c == consumer)
    {
        Some((_, _, held)) => *held = held.saturating_add(permits),
        None => withheld.push((index, consumer, permits)),
    }
}

impl Driver {
    /// Sends FLOWs that were held back, to the subs still under the
    /// consumer id they were for (a sub subscribed again since was granted
    /// its whole queue anew).
    async fn send_withheld(&self, released: WithheldFlows) {
        for (index, consumer, permits) in released {
            // Not while it subscribes again (its id is the old one still),
            // nor once given up: no consumer under that id on the broker.
            let Some(sub) = self.subs.get(index).filter(|s| {
                s.id == consumer && !s.removed && !s.lost && !self.resubscribes.is_running(index)
            }) else {
                continue;
            };
            trace!(topic = %sub.name, permits, "FLOW held back goes out");
            if let Err(e) = sub
                .conn
                .send_control(commands::flow(consumer, permits))
                .await
            {
                debug!(topic = %sub.name, error = %e, "withheld FLOW not sent");
            }
        }
    }
}

use command::Reply;
use driver::Sub;
use events::Events;
use leave::SubKey;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, trace, warn};

use super::core::actions::{Action, Incoming};
use super::core::chunks::{self, ChunkAssembler, ChunkLimits};
use super::core::config::CoreConfig;
use super::core::{Acked, ConsumerCore};
use super::error::ConsumerError;
use super::message::Message;
use super::position::Position;
use super::subscribe::SubscribeOptions;
use super::unpack::{self, Delivery};
use crate::client::{Client, TopicName};
use crate::clock;
use crate::connection::{Connection, ConsumerEvent, Response};
use crate::ids::ConsumerId;
use crate::interceptor::{Chain, ConsumerInterceptor};
use crate::message_id::MessageId;
use crate::proto::command_ack::AckType;
use crate::stats::ConsumerRecorder;
use crate::wire::commands::{self, SeekTarget};
