//! The end of a seed: what the broker holds, compared with what the
//! application saw and did.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::message_id::MessageId;
use crate::testing::model::topic::Entry;
use crate::testing::model::{Model, stored};
use crate::testing::record::EventKind;

use super::journal::{OwedCopy, ReadMessage, name_of};
use super::roles::{SUBSCRIPTION, Stage};

/// One message the broker stored: where, and the name it carries.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub(crate) topic: String,
    /// The id a consumer hands it out with (a batch member's own; a
    /// chunked message's last chunk's, its first beside it, as its receipt).
    pub(crate) id: MessageId,
    /// Every entry it takes (more than one when chunked).
    pub(crate) entries: Vec<u64>,
    pub(crate) name: Option<String>,
    /// The id of the message it is a dead letter of (`ORIGIN_MESSAGE_ID`).
    pub(crate) origin: Option<String>,
    /// For a chunked message, where its last chunk was stored again after
    /// the message was whole (a producer's resend after a failure, without
    /// deduplication): its receipt may name one of these as its end.
    pub(crate) last_chunk_again: Vec<MessageId>,
}

/// Every message stored in `topics`, in order per topic.
pub(crate) fn kept(model: &Model, topics: &[String]) -> Vec<Kept> {
    let mut out = Vec::new();
    for topic in topics {
        let Some(t) = model.topic(topic) else {
            continue;
        };
        let mut runs = ChunkRuns::default();
        for (index, entry) in t.entries.iter().enumerate() {
            let m = &entry.metadata;
            let index = index as u64;
            if let (Some(uuid), Some(n)) = (&m.uuid, m.num_chunks_from_msg) {
                if n > 1 {
                    match runs.take(uuid, m.chunk_id.unwrap_or(0), n, index) {
                        ChunkStep::Whole(entries) => {
                            let data: Vec<u8> = entries
                                .iter()
                                .flat_map(|&i| t.entries[i as usize].data.iter().copied())
                                .collect();
                            let mut whole = Entry {
                                data: data.into(),
                                ..entry.clone()
                            };
                            whole.metadata.num_chunks_from_msg = None;
                            whole.metadata.chunk_id = None;
                            let member = stored(&whole, entry.stored_at).into_iter().next();
                            let name = member
                                .as_ref()
                                .and_then(|s| name_of(&s.payload).map(str::to_owned));
                            let origin = member.as_ref().and_then(origin_of);
                            let first = entries
                                .first()
                                .map_or(entry.id, |&i| t.entries[i as usize].id);
                            runs.made_whole(uuid, out.len());
                            out.push(Kept {
                                topic: topic.clone(),
                                id: entry.id.with_first_chunk(first),
                                entries,
                                name,
                                origin,
                                last_chunk_again: Vec::new(),
                            });
                        }
                        ChunkStep::LastAgain(at) => out[at].last_chunk_again.push(entry.id),
                        ChunkStep::Taken | ChunkStep::Skipped => {}
                    }
                    continue;
                }
            }
            for member in stored(entry, entry.stored_at) {
                out.push(Kept {
                    topic: topic.clone(),
                    id: member.id,
                    entries: vec![index],
                    name: name_of(&member.payload).map(str::to_owned),
                    origin: origin_of(&member),
                    last_chunk_again: Vec::new(),
                });
            }
        }
    }
    out
}

/// The chunked messages of one topic, assembled as a consumer does: a
/// first chunk starts its message (over, if its producer began it again);
/// a chunk stored again under a new id (a producer sends its unconfirmed
/// chunks again after a failure, as the Java client does) is a duplicate,
/// skipped; one that skips ahead breaks the message, whose chunks are then
/// fragments of none. Once a message is whole, its chunks stored again
/// are fragments, and its last chunk's copies are where its receipt may
/// say it ends.
#[derive(Default)]
struct ChunkRuns {
    /// Entries of the messages being assembled, by uuid.
    open: HashMap<String, Vec<u64>>,
    /// Messages made whole, by uuid: where each is in the output.
    whole_at: HashMap<String, usize>,
}

/// What one chunk did.
#[derive(Debug, PartialEq, Eq)]
enum ChunkStep {
    /// It joined its message.
    Taken,
    /// It completed its message, whose entries these are.
    Whole(Vec<u64>),
    /// A duplicate, a fragment, or a chunk breaking its message.
    Skipped,
    /// The last chunk again of the message made whole at this index.
    LastAgain(usize),
}

impl ChunkRuns {
    /// Takes chunk `chunk` of `n` of message `uuid`, stored at entry `index`.
    fn take(&mut self, uuid: &str, chunk: i32, n: i32, index: u64) -> ChunkStep {
        if chunk == 0 {
            self.open.remove(uuid);
            self.whole_at.remove(uuid);
        }
        if let Some(&at) = self.whole_at.get(uuid) {
            return if chunk == n - 1 {
                ChunkStep::LastAgain(at)
            } else {
                ChunkStep::Skipped
            };
        }
        let entries = self.open.entry(uuid.to_owned()).or_default();
        let next = entries.len() as i32;
        if chunk < next {
            return ChunkStep::Skipped;
        }
        if chunk > next {
            self.open.remove(uuid);
            return ChunkStep::Skipped;
        }
        entries.push(index);
        if chunk + 1 < n {
            return ChunkStep::Taken;
        }
        ChunkStep::Whole(self.open.remove(uuid).unwrap_or_default())
    }

    /// The message `uuid` just made whole is at `at` in the output.
    fn made_whole(&mut self, uuid: &str, at: usize) {
        self.whole_at.insert(uuid.to_owned(), at);
    }
}

/// The dead-letter topics of the subscription (one per partition, or one
/// for the topic).
pub(crate) fn dead_letter_names(model: &Model) -> HashSet<String> {
    model
        .topic_names()
        .into_iter()
        .filter(|t| t.ends_with("-DLQ"))
        .collect::<Vec<_>>()
        .iter()
        .flat_map(|t| kept(model, std::slice::from_ref(t)))
        .filter_map(|k| k.name)
        .collect()
}

/// The id a dead letter names as its original.
fn origin_of(message: &crate::testing::StoredMessage) -> Option<String> {
    message
        .property(crate::consumer::dead_letter::ORIGIN_MESSAGE_ID)
        .map(str::to_owned)
}

/// Per name in a dead-letter topic, the id of its original (when the
/// letter names it) and how many events the broker had recorded before
/// it stored the letter.
pub(crate) fn dead_lettered_at(model: &Model) -> HashMap<String, Vec<(Option<String>, usize)>> {
    let topics: Vec<String> = model
        .topic_names()
        .into_iter()
        .filter(|t| t.ends_with("-DLQ"))
        .collect();
    let mut letters: HashMap<(&str, u64, u64), Vec<&Kept>> = HashMap::new();
    let kept = kept(model, &topics);
    for k in &kept {
        letters
            .entry((k.topic.as_str(), k.id.ledger_id, k.id.entry_id))
            .or_default()
            .push(k);
    }
    let mut out: HashMap<String, Vec<(Option<String>, usize)>> = HashMap::new();
    for (index, e) in model.events().iter().enumerate() {
        let EventKind::Published { id } = &e.kind else {
            continue;
        };
        let key = (e.topic.as_str(), id.ledger_id, id.entry_id);
        for k in letters.remove(&key).into_iter().flatten() {
            if let Some(name) = &k.name {
                out.entry(name.clone())
                    .or_default()
                    .push((k.origin.clone(), index));
            }
        }
    }
    out
}

/// What is not accounted for yet (`None`: everything stored is, and the
/// subscription is empty; what the end of a run waits for).
pub(crate) fn unsettled(stage: &Stage, topics: &[String]) -> Option<String> {
    let (kept, dead, backlog) = stage.broker.with_model(|m| {
        let backlog: u64 = topics
            .iter()
            .map(|t| m.backlog(t, SUBSCRIPTION).unwrap_or(0))
            .sum();
        (kept(m, topics), dead_letter_names(m), backlog)
    });
    let journal = stage.journal();
    let open: Vec<&str> = kept
        .iter()
        .filter_map(|k| k.name.as_deref())
        .filter(|name| {
            !(journal.attempted.contains(*name)
                || journal.consumed.contains(*name)
                || dead.contains(*name))
        })
        .collect();
    let unread = if stage.workload.reader {
        let seen: HashSet<(&str, MessageId)> = journal
            .read
            .iter()
            .map(|r| (r.topic.as_str(), r.id))
            .collect();
        kept.iter()
            .filter(|k| !seen.contains(&(k.topic.as_str(), k.id)))
            .count()
    } else {
        0
    };
    if backlog == 0 && open.is_empty() && unread == 0 {
        return None;
    }
    let mut what = vec![format!("a backlog of {backlog} entries")];
    if !open.is_empty() {
        let some: Vec<&str> = open.iter().take(5).copied().collect();
        what.push(format!(
            "{} messages never acked nor dead-lettered ({}{})",
            open.len(),
            some.join(", "),
            if open.len() > some.len() { ", ..." } else { "" }
        ));
    }
    if unread > 0 {
        what.push(format!("{unread} messages the reader has not read"));
    }
    Some(what.join("; "))
}

/// The checks at the end of a seed; each failure is a violation.
pub(crate) fn check(stage: &Stage, topics: &[String]) {
    let (kept, dead, dead_at, ack_events) = stage.broker.with_model(|m| {
        (
            kept(m, topics),
            dead_letter_names(m),
            dead_lettered_at(m),
            ack_events(m, topics),
        )
    });
    // The entries acked whole.
    let acked_entries: Vec<(&String, MessageId)> = ack_events
        .iter()
        .filter(|a| a.members.is_none())
        .map(|a| (&a.topic, a.entry))
        .collect();
    let mut journal = stage.journal();
    let batched = stage.workload.batching;
    let mut violations = Vec::new();

    // Every confirmed send is stored, at the id its receipt named.
    let by_id: HashMap<(i32, u64, u64, i32), &Kept> = kept
        .iter()
        .map(|k| {
            (
                (
                    k.id.partition,
                    k.id.ledger_id,
                    k.id.entry_id,
                    k.id.batch_index,
                ),
                k,
            )
        })
        .collect();
    let mut names: HashMap<&str, usize> = HashMap::new();
    for k in &kept {
        match &k.name {
            Some(name) => *names.entry(name).or_default() += 1,
            None => violations.push(format!("{} at {} holds no whole message", k.topic, k.id)),
        }
    }
    let mut confirmed: Vec<(&String, &MessageId)> = journal.confirmed.iter().collect();
    confirmed.sort();
    for (name, id) in confirmed {
        let at = by_id
            .get(&(id.partition, id.ledger_id, id.entry_id, id.batch_index))
            .and_then(|k| k.name.as_deref());
        // A chunked message whose last chunk was sent again once it was
        // whole: its receipt names the copy's end (the Java client's too).
        let end_again = || {
            kept.iter().any(|k| {
                k.name.as_deref() == Some(name.as_str())
                    && k.id.first_chunk() == id.first_chunk()
                    && k.last_chunk_again.contains(&id.position())
            })
        };
        if at != Some(name.as_str()) && !end_again() {
            violations.push(format!(
                "{name} was confirmed at {id} but the broker holds {at:?} there"
            ));
        }
    }

    // Everything stored ends consumed or dead-lettered, and the
    // subscription is empty.
    for k in &kept {
        if let Some(name) = &k.name {
            if !journal.attempted.contains(name)
                && !journal.consumed.contains(name)
                && !dead.contains(name)
            {
                violations.push(format!(
                    "{name} ({} {}) was neither acked by the application nor dead-lettered",
                    k.topic, k.id
                ));
            }
        }
    }

    // No entry acked that the application was never handed, unless its
    // messages went to the dead-letter topic.
    let mut entry_names: HashMap<(String, u64, u64), Vec<&str>> = HashMap::new();
    for k in &kept {
        for e in &k.entries {
            if let Some(name) = &k.name {
                entry_names
                    .entry((k.topic.clone(), k.id.ledger_id, *e))
                    .or_default()
                    .push(name);
            }
        }
    }
    let handed_names: HashSet<&str> = journal
        .handed_entries
        .iter()
        .flat_map(|e| entry_names.get(e).into_iter().flatten().copied())
        .collect();
    for (topic, id) in &acked_entries {
        let inside = entry_names
            .get(&((*topic).clone(), id.ledger_id, id.entry_id))
            .cloned()
            .unwrap_or_default();
        let known = inside
            .iter()
            .any(|n| handed_names.contains(n) || dead.contains(*n));
        if !known && !inside.is_empty() {
            violations.push(format!(
                "the broker has {topic} {id} acked ({inside:?}) but the application was never handed it"
            ));
        }
    }

    rewinds_kept(&journal, &kept, &dead, &ack_events, &mut violations);

    // A batch member acked Ok came back: broken only if its consumer had
    // acked the whole entry by then.
    let mut members: HashMap<(&str, u64, u64), usize> = HashMap::new();
    for k in kept.iter().filter(|k| k.id.is_batch_member()) {
        *members
            .entry((k.topic.as_str(), k.id.ledger_id, k.id.entry_id))
            .or_default() += 1;
    }
    for copy in &journal.member_copies {
        let (topic, ledger, entry) = &copy.entry;
        let size = members
            .get(&(topic.as_str(), *ledger, *entry))
            .copied()
            .unwrap_or(0);
        if copy.acked_before >= size {
            violations.push(format!("{} (its whole batch acked)", copy.text));
        }
    }

    // A cursor reset brings back what the application acked Ok (with
    // receipts, so the broker had applied it): each such message is handed
    // out again after the reset, or dead-lettered. Without batch index ack,
    // the acks of a batch's members reach the broker only with the whole
    // batch; a member of a batch not wholly acked by the reset is owed all
    // the same: the consumer forgets its members' acks at the reconnect,
    // so the reset's copy comes whole and is acked only by acks made
    // after it.
    let mut owed: Vec<(&String, &OwedCopy)> = journal.owed_after_reset.iter().collect();
    owed.sort_by_key(|(name, _)| *name);
    for (name, copy) in owed {
        let size = members
            .get(&(copy.topic.as_str(), copy.id.ledger_id, copy.id.entry_id))
            .copied()
            .unwrap_or(0);
        // Without batch index ack a member's `Ok` means recorded: the
        // broker hears of it with its entry's ACK, once every member is
        // acked. An entry ACK the reset overtook (lost with the consumer)
        // is sent again after it, as the Java client sends its pending
        // acks: what the broker did not apply between the rewind before
        // and the reset is not owed.
        let since = journal
            .rewind_marks()
            .iter()
            .copied()
            .filter(|&m| m < copy.reset_events)
            .max()
            .unwrap_or(0);
        let entry_applied = || {
            ack_events.iter().any(|a| {
                (since..copy.reset_events).contains(&a.index)
                    && a.members.is_none()
                    && a.topic == copy.topic
                    && (a.entry.ledger_id, a.entry.entry_id)
                        == (copy.id.ledger_id, copy.id.entry_id)
            })
        };
        // Members forwarded to the dead-letter topic complete a batch as
        // acks do.
        let entry_of = |origin: &str| {
            let mut parts = origin.split(':').map(str::parse::<i64>);
            (parts.next(), parts.next(), parts.next())
        };
        let dead_members = dead_at
            .values()
            .flatten()
            .filter_map(|(origin, _)| origin.as_deref())
            .filter(|origin| {
                entry_of(origin)
                    == (
                        Some(Ok(copy.id.ledger_id as i64)),
                        Some(Ok(copy.id.entry_id as i64)),
                        Some(Ok(i64::from(copy.id.partition))),
                    )
            })
            .count();
        let never_sent = copy.id.is_batch_member()
            && !journal.batch_index_ack
            && copy.members_acked + dead_members >= size
            && !entry_applied();
        if !never_sent && !dead.contains(name.as_str()) {
            violations.push(format!(
                "{name} ({} {}) was acked Ok before the cursor reset at record {}, and never handed out again after it",
                copy.topic, copy.id, copy.reset_at
            ));
        }
    }

    // Nothing acked Ok with receipts on is also in the dead-letter topic
    // (a batch may be forwarded whole, as documented).
    if journal.receipts && !batched {
        for name in journal.acked_and_dead_lettered(&dead_at) {
            violations.push(format!(
                "{name} was acked Ok and is in the dead-letter topic too"
            ));
        }
    }

    // The reader read every stored message once, in order per partition.
    if stage.workload.reader {
        // In the order of their positions (a chunked message's last chunk).
        let mut per_topic: BTreeMap<&str, Vec<&ReadMessage>> = BTreeMap::new();
        for r in &journal.read {
            per_topic.entry(&r.topic).or_default().push(r);
        }
        for (topic, reads) in &per_topic {
            for pair in reads.windows(2) {
                let key = |i: &MessageId| (i.ledger_id, i.entry_id, i.batch_index);
                if key(&pair[1].position) <= key(&pair[0].position) {
                    violations.push(format!(
                        "the reader read {topic} {} ({} at {}) after {} ({} at {})",
                        pair[1].name,
                        pair[1].id,
                        pair[1].position,
                        pair[0].name,
                        pair[0].id,
                        pair[0].position
                    ));
                }
            }
        }
        let read: HashSet<(&str, MessageId)> = journal
            .read
            .iter()
            .map(|r| (r.topic.as_str(), r.id))
            .collect();
        for k in &kept {
            if !read.contains(&(k.topic.as_str(), k.id)) {
                violations.push(format!(
                    "the reader never read {} {} ({:?})",
                    k.topic, k.id, k.name
                ));
            }
        }
    }
    for v in violations {
        journal.violation(v);
    }
}

/// An ack the broker applied for the subscription: where in its record,
/// the partition topic, the entry, and the members it names (`None`: the
/// whole entry).
pub(crate) struct AckEvent {
    index: usize,
    topic: String,
    entry: MessageId,
    members: Option<Vec<i32>>,
    /// The name of the consumer whose ACK it was.
    by: Option<String>,
}

/// Every ack the broker applied on the subscription of `topics`, in order.
fn ack_events(model: &Model, topics: &[String]) -> Vec<AckEvent> {
    let ours = |e: &crate::testing::Event, subscription: &str| {
        subscription == SUBSCRIPTION && topics.contains(&e.topic)
    };
    model
        .events()
        .iter()
        .enumerate()
        .filter_map(|(index, e)| match &e.kind {
            EventKind::Acked { subscription, id } if ours(e, subscription) => Some(AckEvent {
                index,
                topic: e.topic.clone(),
                entry: *id,
                members: None,
                by: model.acked_by(index).map(str::to_owned),
            }),
            EventKind::MembersAcked {
                subscription,
                id,
                members,
            } if ours(e, subscription) => Some(AckEvent {
                index,
                topic: e.topic.clone(),
                entry: *id,
                members: Some(members.clone()),
                by: model.acked_by(index).map(str::to_owned),
            }),
            _ => None,
        })
        .collect()
}

/// A rewind (a seek, a cursor reset) is kept: the broker applies no ack,
/// after it, of a message the application neither was handed nor acked
/// since and that is not in the dead-letter topic. The client never acks
/// on its own what a rewind brought back. Excused: an ack the application
/// made before the rewind that the broker had not applied by then (in
/// flight, or a batch member held until its batch is acked), or applied
/// with a cut between its answer and the rewind (the answer may be lost):
/// the client cannot tell those from acks lost with a connection, and
/// sends them again, as documented.
fn rewinds_kept(
    journal: &super::journal::Journal,
    kept: &[Kept],
    dead: &HashSet<String>,
    acks: &[AckEvent],
    violations: &mut Vec<String>,
) {
    let marks = journal.rewind_marks();
    let Some(&first) = marks.first() else {
        return;
    };
    let mut by_entry: HashMap<(&str, u64, u64), Vec<&Kept>> = HashMap::new();
    for k in kept {
        for e in &k.entries {
            by_entry
                .entry((k.topic.as_str(), k.id.ledger_id, *e))
                .or_default()
                .push(k);
        }
    }
    let covers = |ack: &AckEvent, k: &Kept| {
        ack.members
            .as_ref()
            .is_none_or(|m| m.contains(&k.id.batch_index))
    };
    // When the application's acks of message `k` began: its individual
    // ack, and the cumulative acks that cover it.
    let acks_of = |k: &Kept, name: &str| {
        let cumulative = journal.cumulative_acks.iter().filter(|(topic, upto, _)| {
            *topic == k.topic
                && (k.id.ledger_id, k.id.entry_id, k.id.batch_index)
                    <= (upto.ledger_id, upto.entry_id, upto.batch_index)
        });
        journal
            .ack_began
            .get(name)
            .into_iter()
            .flatten()
            .copied()
            .chain(cumulative.map(|(_, _, began)| *began))
            .collect::<Vec<_>>()
    };
    // The application's own word, since epoch `e`, for message `k`.
    let acked_since = |k: &Kept, name: &str, e: u64| {
        journal.handed_epoch.get(name).is_some_and(|h| *h >= e)
            || acks_of(k, name).iter().any(|a| a.epoch >= e)
            || dead.contains(name)
    };
    let mut reported = HashSet::new();
    for ack in acks.iter().filter(|a| a.index >= first) {
        let epoch = journal.real_epoch(
            marks.iter().filter(|&&m| m <= ack.index).count() as u64,
            &ack.topic,
        );
        if epoch == 0 {
            continue;
        }
        let mark = marks[epoch as usize - 1];
        let key = (ack.topic.as_str(), ack.entry.ledger_id, ack.entry.entry_id);
        for k in by_entry.get(&key).into_iter().flatten() {
            let Some(name) = k.name.as_deref() else {
                continue;
            };
            if !covers(ack, k) || acked_since(k, name, epoch) || reported.contains(name) {
                continue;
            }
            // An ack the application made before the rewind that the
            // broker did not apply while its consumer's subscription
            // lasted (lost with it, or a batch member held back), or
            // applied with a cut after it (its answer may be lost): the
            // client keeps such an ack and sends it again.
            let before: Vec<_> = acks_of(k, name)
                .into_iter()
                .filter(|a| a.epoch < epoch)
                .collect();
            if before.is_empty() {
                reported.insert(name);
                violations.push(format!(
                    "{name} ({} {}) was acked on the broker after the rewind of epoch {epoch} (event {}), and the application never acked it",
                    k.topic, k.id, ack.index
                ));
                continue;
            }
            let in_flight = before.iter().any(|began| {
                let end = journal
                    .loss_marks
                    .iter()
                    .copied()
                    .filter(|&l| l >= began.events)
                    .min()
                    .unwrap_or(mark)
                    .min(mark);
                // Applied by that consumer: another's ack of the message
                // is none of its client's business.
                let by = super::roles::consumer_name(began.consumer);
                let applied = acks
                    .iter()
                    .filter(|a| a.by.as_ref().is_none_or(|b| *b == by))
                    .filter(|a| began.events <= a.index && a.index < end)
                    .filter(|a| (a.topic.as_str(), a.entry.ledger_id, a.entry.entry_id) == key)
                    .filter(|a| covers(a, k))
                    .map(|a| a.index)
                    .next_back();
                match applied {
                    None => true,
                    Some(at) => journal.cut_marks.iter().any(|&c| at < c && c <= end),
                }
            });
            if !in_flight {
                reported.insert(name);
                violations.push(format!(
                    "{name} ({} {}) was acked on the broker after the rewind of epoch {epoch} (event {}), but the application was not handed it since, nor acked it",
                    k.topic, k.id, ack.index
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ChunkRuns, ChunkStep};

    #[test]
    fn a_chunk_stored_again_before_the_message_is_whole_is_skipped() {
        let mut runs = ChunkRuns::default();
        assert_eq!(runs.take("u", 0, 3, 0), ChunkStep::Taken);
        assert_eq!(runs.take("u", 1, 3, 1), ChunkStep::Taken);
        assert_eq!(runs.take("u", 1, 3, 2), ChunkStep::Skipped);
        assert_eq!(runs.take("u", 2, 3, 3), ChunkStep::Whole(vec![0, 1, 3]));
    }

    #[test]
    fn chunks_stored_again_after_the_message_is_whole_are_fragments_but_its_end() {
        let mut runs = ChunkRuns::default();
        runs.take("u", 0, 3, 0);
        runs.take("u", 1, 3, 1);
        assert_eq!(runs.take("u", 2, 3, 2), ChunkStep::Whole(vec![0, 1, 2]));
        runs.made_whole("u", 7);
        assert_eq!(runs.take("u", 1, 3, 3), ChunkStep::Skipped);
        assert_eq!(runs.take("u", 2, 3, 4), ChunkStep::LastAgain(7));
    }

    #[test]
    fn a_chunk_that_skips_ahead_breaks_its_message_and_a_first_chunk_starts_over() {
        let mut runs = ChunkRuns::default();
        runs.take("u", 0, 3, 0);
        assert_eq!(runs.take("u", 2, 3, 1), ChunkStep::Skipped);
        assert_eq!(runs.take("u", 1, 3, 2), ChunkStep::Skipped);
        assert_eq!(runs.take("u", 0, 3, 3), ChunkStep::Taken);
        assert_eq!(runs.take("u", 1, 3, 4), ChunkStep::Taken);
        assert_eq!(runs.take("u", 2, 3, 5), ChunkStep::Whole(vec![3, 4, 5]));
    }
}
