//! [`TestBroker`]: the model broker behind in-memory connections, and the
//! thin tasks that drive it (one per connection, one timer).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::codec::Framed;

use super::model::topic::ConnId;
use super::model::{Model, Out};
use super::record::{Event, EventKind, StoredMessage};
use crate::client::{BrokerAddress, BrokerStream, Client, ClientBuilder, Connector};
use crate::clock;
use crate::codec::PulsarCodec;
use crate::error::Error;
use crate::message_id::MessageId;
use crate::proto::ServerError;
use crate::wire::Frame;

/// Bytes each in-memory connection buffers per direction.
const PIPE: usize = 1024 * 1024;

/// The address the test broker answers lookups with.
const SERVICE_URL: &str = "pulsar://test-broker:6650";

/// What a connection's task writes.
enum ToConn {
    Frame(Box<Frame>),
    Close,
}

struct Inner {
    model: Mutex<Model>,
    conns: Mutex<HashMap<ConnId, mpsc::UnboundedSender<ToConn>>>,
    /// Bumped after every change, for [`TestBroker::wait_until`].
    version: watch::Sender<u64>,
    /// Wakes the timer task when a deadline may have moved.
    timer: Arc<Notify>,
}

impl Inner {
    fn model(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `change` on the model and carries out what it asks for.
    fn apply(&self, change: impl FnOnce(&mut Model)) {
        let out = {
            let mut model = self.model();
            change(&mut model);
            model.take_output()
        };
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        for out in out {
            let (conn, what) = match out {
                Out::Frame(conn, frame) => (conn, ToConn::Frame(frame)),
                Out::Close(conn) => (conn, ToConn::Close),
            };
            if let Some(tx) = conns.get(&conn) {
                let _ = tx.send(what);
            }
        }
        drop(conns);
        self.version.send_modify(|v| *v += 1);
        self.timer.notify_one();
    }
}

/// An in-process Pulsar broker for tests: clients reach it through
/// in-memory connections (no socket, no process), it speaks the real
/// protocol, and it runs on tokio's clock, so under
/// `#[tokio::test(start_paused = true)]` ack timeouts, nack delays,
/// delayed delivery and retries take no real time and every run is the
/// same.
///
/// It keeps topics (partitioned too), subscriptions of the four types,
/// redelivery counts, delayed delivery, and records what happened
/// ([`events`](Self::events)) for assertions. Faults can be injected:
/// [`disconnect_all`](Self::disconnect_all), [`fail_sends`](Self::fail_sends),
/// [`slow_sends`](Self::slow_sends). Where it differs from Apache Pulsar is
/// listed in `docs/testing-kit.md`.
///
/// Cheap to clone; clones share the broker.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), pulsar_wire::Error> {
/// use pulsar_wire::testing::TestBroker;
/// use pulsar_wire::producer::ProducerMessage;
///
/// let broker = TestBroker::start();
/// let client = broker.client().await?;
/// let producer = client.producer("orders").create().await?;
/// producer.send(ProducerMessage::new("one")).await?.await?;
/// let stored = broker.messages("persistent://public/default/orders");
/// assert_eq!(stored[0].text(), "one");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TestBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TestBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBroker").finish_non_exhaustive()
    }
}

impl TestBroker {
    /// Starts a broker with no topics.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns its timer task).
    pub fn start() -> Self {
        let timer = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            model: Mutex::new(Model::new(SERVICE_URL.to_owned(), clock::now())),
            conns: Mutex::new(HashMap::new()),
            version: watch::Sender::new(0),
            timer: timer.clone(),
        });
        tokio::spawn(run_timer(Arc::downgrade(&inner), timer));
        Self { inner }
    }

    /// The service URL to give a [`ClientBuilder`] with
    /// [`connector`](Self::connector).
    pub fn service_url(&self) -> &'static str {
        SERVICE_URL
    }

    /// The connector that opens in-memory connections to this broker (for
    /// [`ClientBuilder::connector`]); any address reaches it.
    pub fn connector(&self) -> impl Connector + use<> {
        TestConnector {
            inner: self.inner.clone(),
        }
    }

    /// A client builder set up for this broker: its service URL and
    /// connector; add settings and [`build`](ClientBuilder::build).
    pub fn client_builder(&self) -> ClientBuilder {
        Client::builder()
            .service_url(SERVICE_URL)
            .connector(self.connector())
    }

    /// A client of this broker.
    ///
    /// # Errors
    /// As [`ClientBuilder::build`].
    pub async fn client(&self) -> Result<Client, Error> {
        self.client_builder().build().await
    }

    /// Makes `topic` (a full name) a partitioned topic of `partitions`
    /// partitions (`<topic>-partition-<i>`).
    pub fn create_partitioned_topic(&self, topic: &str, partitions: u32) {
        self.inner
            .apply(|m| m.create_partitioned(topic, partitions));
    }

    /// The messages stored in `topic` (a full name; a partition's own
    /// name for a partitioned topic), in publish order.
    pub fn messages(&self, topic: &str) -> Vec<StoredMessage> {
        self.inner.model().messages(topic)
    }

    /// The dead-letter copies of `topic`'s `subscription` (in
    /// `<topic>-<subscription>-DLQ`, the default dead-letter topic).
    pub fn dead_letters(&self, topic: &str, subscription: &str) -> Vec<StoredMessage> {
        self.messages(&format!("{topic}-{subscription}-DLQ"))
    }

    /// The topics that exist (created by a producer, a consumer or a lookup
    /// of a partition).
    pub fn topics(&self) -> Vec<String> {
        self.inner.model().topic_names()
    }

    /// Everything that happened so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.inner.model().events().to_vec()
    }

    /// The entries `subscription` of `topic` acked, in the order acked.
    pub fn acked(&self, topic: &str, subscription: &str) -> Vec<MessageId> {
        self.select(topic, |kind| match kind {
            EventKind::Acked {
                subscription: s,
                id,
            } if s == subscription => Some(*id),
            _ => None,
        })
    }

    /// Each delivery to `subscription` of `topic`: when (since the broker
    /// started), the entry, and the redelivery count it carried.
    pub fn deliveries(&self, topic: &str, subscription: &str) -> Vec<(Duration, MessageId, u32)> {
        self.events()
            .into_iter()
            .filter(|e| e.topic == topic)
            .filter_map(|e| match e.kind {
                EventKind::Delivered {
                    subscription: s,
                    id,
                    redelivery_count,
                } if s == subscription => Some((e.at, id, redelivery_count)),
                _ => None,
            })
            .collect()
    }

    /// The entries `subscription` of `topic` asked for again (nacks and
    /// ack timeouts), with when.
    pub fn redelivery_requests(
        &self,
        topic: &str,
        subscription: &str,
    ) -> Vec<(Duration, MessageId)> {
        self.events()
            .into_iter()
            .filter(|e| e.topic == topic)
            .filter_map(|e| match e.kind {
                EventKind::RedeliveryRequested {
                    subscription: s,
                    id,
                } if s == subscription => Some((e.at, id)),
                _ => None,
            })
            .collect()
    }

    /// How many entries of `topic` `subscription` has not acked; `None`
    /// if there is no such subscription.
    pub fn backlog(&self, topic: &str, subscription: &str) -> Option<u64> {
        self.inner.model().backlog(topic, subscription)
    }

    fn select<T>(&self, topic: &str, pick: impl Fn(&EventKind) -> Option<T>) -> Vec<T> {
        let model = self.inner.model();
        model
            .events()
            .iter()
            .filter(|e| e.topic == topic)
            .filter_map(|e| pick(&e.kind))
            .collect()
    }

    /// Waits until `condition` holds, checking after every change at the
    /// broker. Put a `tokio::time::timeout` around it as a hang guard: on
    /// a paused clock, time moves on while everything waits.
    pub async fn wait_until(&self, mut condition: impl FnMut(&Self) -> bool) {
        let mut changes = self.inner.version.subscribe();
        loop {
            if condition(self) {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Closes every connection, as a broker restart would; clients
    /// reconnect, and what their consumers held is delivered again.
    pub fn disconnect_all(&self) {
        self.inner.apply(|m| m.disconnect_all(clock::now()));
    }

    /// Unloads `topic` (a full name; every partition of a partitioned
    /// topic), as a broker does when a topic moves: CLOSE_PRODUCER and
    /// CLOSE_CONSUMER go to every producer and consumer of it, which
    /// reconnect; what the consumers held is delivered again.
    pub fn unload(&self, topic: &str) {
        let names = self.partitions_of(topic);
        self.inner.apply(|m| {
            for name in &names {
                m.close_producers(name);
                m.close_consumers(clock::now(), name, None);
            }
        });
    }

    /// Closes, from the broker's side, the consumers of `topic` (every
    /// partition of a partitioned topic): CLOSE_CONSUMER, and they
    /// subscribe again.
    pub fn close_consumers(&self, topic: &str) {
        let names = self.partitions_of(topic);
        self.inner.apply(|m| {
            for name in &names {
                m.close_consumers(clock::now(), name, None);
            }
        });
    }

    /// Moves `subscription` of `topic` (every partition of a partitioned
    /// topic) back to its first message, as `pulsar-admin topics
    /// reset-cursor` does: everything is delivered again, and the
    /// subscription's consumers are closed and subscribe again.
    pub fn reset_cursor(&self, topic: &str, subscription: &str) {
        let names = self.partitions_of(topic);
        self.inner.apply(|m| {
            for name in &names {
                m.reset_cursor(clock::now(), name, subscription);
            }
        });
    }

    /// `topic` itself, or its partitions' names if it is partitioned.
    fn partitions_of(&self, topic: &str) -> Vec<String> {
        match self.inner.model().partitions(topic) {
            0 => vec![topic.to_owned()],
            n => (0..n).map(|i| format!("{topic}-partition-{i}")).collect(),
        }
    }

    /// Announces `bytes` as the broker's message size to connections made
    /// from now on (so producers cut chunks that small).
    pub(crate) fn set_max_message_size(&self, bytes: i32) {
        self.inner.apply(|m| m.set_max_message_size(bytes));
    }

    /// Waits until the broker has seen `count` changes.
    pub(crate) async fn wait_for_changes(&self, count: u64) {
        let mut changes = self.inner.version.subscribe();
        while *changes.borrow_and_update() < count {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Runs `inspect` on the broker's model.
    pub(crate) fn with_model<T>(&self, inspect: impl FnOnce(&Model) -> T) -> T {
        inspect(&self.inner.model())
    }

    /// Refuses the next `count` SENDs to `topic` with `code` (a
    /// SEND_ERROR).
    pub fn fail_sends(&self, topic: &str, count: usize, code: ServerError) {
        self.inner.apply(|m| m.fail_sends(topic, count, code));
    }

    /// Stores each chunk after a chunked message's first `pace` after its
    /// producer's SEND before it, as from a producer on a slow link, so
    /// other producers' messages are stored between the chunks (`None`:
    /// every SEND is stored as it arrives).
    pub fn pace_chunks(&self, pace: Option<Duration>) {
        self.inner.apply(|m| m.pace_chunks(pace));
    }

    /// Stores and confirms SENDs to `topic` only `delay` after they arrive
    /// (a slow topic, e.g. a slow dead-letter topic); zero ends it.
    pub fn slow_sends(&self, topic: &str, delay: Duration) {
        self.inner.apply(|m| m.slow_sends(topic, delay));
    }
}

/// Opens in-memory connections to a [`TestBroker`].
#[derive(Clone)]
struct TestConnector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TestConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestConnector")
    }
}

impl Connector for TestConnector {
    fn connect(&self, _: &BrokerAddress) -> BoxFuture<'static, io::Result<Box<dyn BrokerStream>>> {
        let (client, broker) = tokio::io::duplex(PIPE);
        let inner = self.inner.clone();
        tokio::spawn(serve(inner, broker));
        Box::pin(async move { Ok(Box::new(client) as Box<dyn BrokerStream>) })
    }
}

/// One connection: frames in go to the model, the model's frames out.
async fn serve(inner: Arc<Inner>, io: tokio::io::DuplexStream) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = inner.model().connect();
    inner
        .conns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(conn, tx);
    let (mut sink, mut stream) = Framed::new(io, PulsarCodec::default()).split();
    loop {
        tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(frame)) => inner.apply(|m| m.on_frame(clock::now(), conn, frame)),
                _ => break,
            },
            out = rx.recv() => match out {
                Some(ToConn::Frame(frame)) => {
                    if sink.send(*frame).await.is_err() {
                        break;
                    }
                }
                Some(ToConn::Close) | None => break,
            },
        }
    }
    inner
        .conns
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&conn);
    inner.apply(|m| m.on_disconnect(clock::now(), conn));
}

/// Calls the model's tick at its deadlines, while the broker lives.
async fn run_timer(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let deadline = match inner.upgrade() {
            Some(inner) => inner.model().next_deadline(),
            None => return,
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {
                        let Some(inner) = inner.upgrade() else { return };
                        inner.apply(|m| m.on_tick(clock::now()));
                    }
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}
