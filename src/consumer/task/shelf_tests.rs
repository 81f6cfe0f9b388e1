//! A `receive()` that finds the shelf empty waits there: it is woken when
//! a message is queued, when the task must answer instead, and when the
//! task ends, also by a panic; never for nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

use super::*;
use crate::consumer::SubscriptionType;
use crate::consumer::message::MessageFields;

/// Counts its wake-ups.
#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let counter = Arc::new(Counter::default());
    (counter.clone(), Waker::from(counter))
}

/// A receive that found `shelf` empty and waits there: its wake-ups.
fn waiting_on(shelf: &Shelf) -> (Arc<Counter>, Waker) {
    let (counter, waker) = counter();
    assert!(matches!(shelf.take_or_wake(&waker), Taken::Empty));
    (counter, waker)
}

fn woken(counter: &Counter) -> usize {
    counter.0.load(Ordering::SeqCst)
}

/// A shelf open to direct takes, with one sub and nothing queued.
fn open_shelf() -> Arc<Shelf> {
    shelf_with(CoreConfig::default())
}

/// A Failover consumer's shelf: a nack there asks for a rewind that waits
/// at least the rewind delay.
fn failover_shelf() -> Arc<Shelf> {
    shelf_with(CoreConfig {
        subscription_type: SubscriptionType::Failover,
        ..CoreConfig::default()
    })
}

fn shelf_with(config: CoreConfig) -> Arc<Shelf> {
    let shelf = Arc::new(Shelf::for_tests(&config));
    shelf.lock().slots.push(Slot {
        name: "persistent://public/default/t".into(),
        core: ConsumerCore::new(config).expect("a valid config"),
        position: Position::new(None, false, false),
        removed: false,
    });
    shelf
}

/// Queues message `entry` in the sub, as the task does for a delivery.
fn queue(shelf: &Shelf, entry: u64) {
    let id = MessageId::new(1, entry);
    let message = Message(Arc::new(MessageFields {
        id,
        topic: "persistent://public/default/t".into(),
        payload: bytes::Bytes::from_static(b"m"),
        key: None,
        key_is_base64: false,
        ordering_key: None,
        properties: HashMap::new(),
        event_time: None,
        publish_time: 1,
        producer_name: "p".into(),
        sequence_id: entry,
        redelivery_count: 0,
        null_value: false,
        batch_size: None,
        undecoded: None,
        schema_version: None,
        last_chunk: None,
    }));
    let incoming = Incoming {
        id,
        position: id,
        redelivery_count: 0,
        consumer_epoch: None,
        batch_size: None,
        message,
    };
    let now = shelf.core_now();
    shelf.lock().slots[0]
        .core
        .on_message(now, incoming)
        .expect("queued");
}

#[test]
fn a_waiting_receive_is_woken_by_a_queued_message_and_takes_it() {
    let shelf = open_shelf();
    let (counter, waker) = waiting_on(&shelf);
    assert!(matches!(shelf.take_or_wake(&waker), Taken::Empty));
    queue(&shelf, 7);
    // The task's turn ends by telling the shelf whether it is open.
    shelf.set_open(true);
    assert_eq!(woken(&counter), 1, "once, however often it polled");
    match shelf.take_or_wake(&waker) {
        Taken::Message(Ok(m)) => assert_eq!(m.id(), MessageId::new(1, 7)),
        other => panic!("expected the message, got {other:?}"),
    }
}

#[test]
fn nothing_new_wakes_nobody() {
    let shelf = open_shelf();
    let (counter, _waker) = waiting_on(&shelf);
    shelf.set_open(true);
    shelf.set_open(true);
    assert_eq!(woken(&counter), 0);
}

#[test]
fn a_waiting_receive_is_woken_when_the_task_must_answer() {
    let shelf = open_shelf();
    let (counter, waker) = waiting_on(&shelf);
    // A report waits for the next receiver, say: direct takes stop.
    shelf.set_open(false);
    assert_eq!(woken(&counter), 1);
    assert!(matches!(shelf.take_or_wake(&waker), Taken::AskTheTask));
}

#[test]
fn a_waiting_receive_is_woken_when_the_task_panics() {
    let shelf = open_shelf();
    let (counter, waker) = waiting_on(&shelf);
    let guard = CloseOnDrop(shelf.clone());
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = guard;
        panic!("a bug in the consumer's task");
    }));
    assert!(panicked.is_err());
    assert_eq!(woken(&counter), 1);
    // It asks the task, and finds it gone.
    assert!(matches!(shelf.take_or_wake(&waker), Taken::AskTheTask));
    shelf.set_open(true);
    assert!(
        matches!(shelf.take_or_wake(&waker), Taken::AskTheTask),
        "closed for good"
    );
}

/// Takes message 7 and nacks it, as a handle does.
fn take_and_nack(shelf: &Shelf, waker: &Waker) {
    queue(shelf, 7);
    shelf.set_open(true);
    let Taken::Message(Ok(m)) = shelf.take_or_wake(waker) else {
        panic!("message 7 is queued");
    };
    let now = shelf.core_now();
    shelf.lock().slots[0].core.nack(now, m.id(), 0);
}

#[test]
fn an_empty_take_that_starts_a_rewinds_wait_wakes_the_task_to_time_it() {
    let shelf = failover_shelf();
    let (_, waker) = counter();
    take_and_nack(&shelf, &waker);
    shelf.touched();
    // The queue is empty: the rewind now waits only for its delay, and
    // the task must arm its timer for it (no receive will ask it to).
    assert!(matches!(shelf.take_or_wake(&waker), Taken::Empty));
    assert!(shelf.lock().slots[0].core.next_deadline().is_some());
    assert_eq!(shelf.touched(), [0], "the task is told");
}

#[tokio::test(start_paused = true)]
async fn a_rewind_waits_its_delay_from_the_nack_not_from_the_consumers_start() {
    let shelf = failover_shelf();
    let (_, waker) = counter();
    tokio::time::advance(Duration::from_secs(10)).await;
    take_and_nack(&shelf, &waker);
    assert!(matches!(shelf.take_or_wake(&waker), Taken::Empty));
    let due = shelf.lock().slots[0]
        .core
        .next_deadline()
        .expect("a rewind waits");
    assert!(
        due >= clock::now() + crate::consumer::core::config::DEFAULT_REWIND_MIN_DELAY,
        "due {:?} after now",
        due.checked_duration_since(clock::now())
    );
}
