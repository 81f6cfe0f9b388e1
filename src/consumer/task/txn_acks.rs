//! Acks in a transaction: sent at once with the transaction's id and a
//! request id, answered by the broker's ACK_RESPONSE, and kept out of the
//! core: they take effect only when the transaction commits (the broker
//! holds them pending until then), and an abort undoes them.
//!
//! The subscription is added to the transaction before the first ack on
//! it; the transaction's commit waits for every ack's answer.

use super::*;
use crate::connection::ConnectionError;
use crate::ids::TxnId;
use crate::proto::ServerError;
use crate::transaction::{EndHook, Transaction, TransactionError};

/// One transactional ack, as the handle asked for it.
#[derive(Debug)]
pub(super) struct TxnAck {
    pub(super) id: MessageId,
    pub(super) batch_size: Option<u32>,
    pub(super) cumulative: bool,
    pub(super) txn: Transaction,
    pub(super) on_end: Option<EndHook>,
}

/// The ACK's id for `id`: a batch member names its entry with an
/// `ack_set` (bit `i` set while member `i` stays unacked) that clears its
/// own bit, or every bit up to its own for a cumulative ack.
fn ack_id(id: MessageId, batch_size: Option<u32>, cumulative: bool) -> crate::proto::MessageIdData {
    let mut data = id.to_proto();
    let Some(size) = batch_size.filter(|_| id.is_batch_member()) else {
        return data;
    };
    let index = u32::try_from(id.batch_index).unwrap_or(0);
    let mut words = vec![0_u64; size.div_ceil(64) as usize];
    for i in 0..size {
        let acked = if cumulative { i <= index } else { i == index };
        if !acked {
            words[(i / 64) as usize] |= 1 << (i % 64);
        }
    }
    data.ack_set = words.into_iter().map(|w| w as i64).collect();
    data.batch_size = i32::try_from(size).ok();
    data
}

/// The broker's refusal of a transactional ACK: typed as a transaction
/// error when it is about the transaction (a conflict with another
/// transaction's ack of the message, a transaction it does not know or
/// that is not open).
fn refused(topic: &str, txn: TxnId, source: ConnectionError) -> ConsumerError {
    match &source {
        ConnectionError::Server {
            code:
                ServerError::TransactionConflict
                | ServerError::TransactionNotFound
                | ServerError::InvalidTxnStatus,
            ..
        } => TransactionError::from_request("ACK", txn.most_bits, Some(txn), source).into(),
        _ => ConsumerError::Request {
            op: "ACK",
            topic: topic.to_owned(),
            source,
        },
    }
}

impl Driver {
    /// Sends `ack` on `topic`'s subscription, in the background: adds the
    /// subscription to the transaction, then sends the ACK as a request. A
    /// partition that subscribes again is waited for first (at most the
    /// operation timeout), so the ACK goes out under its new consumer id:
    /// one sent under the old id would fail, and the commit with it.
    pub(super) async fn ack_in_txn(&mut self, topic: &str, mut ack: TxnAck, reply: Reply<()>) {
        let Some(index) = self.find(topic) else {
            let _ = reply.send(Err(ConsumerError::ForeignMessage {
                topic: topic.to_owned(),
            }));
            return;
        };
        if self.resubscribes.is_running(index) {
            if let Err(e) = self.settle_resubscribes("ACK").await {
                let _ = reply.send(Err(e));
                return;
            }
        }
        if self.subs[index].lost {
            let _ = reply.send(Err(self.lost_error(index)));
            return;
        }
        if ack.cumulative {
            // Never past the first chunk of a chunked message not handed
            // out yet (core/chunk_gate.rs): what the ACK leaves goes once
            // the transaction commits, as a plain cumulative ack held back.
            let reach = self.shelf.lock().slots[index].core.cumulative_reach(ack.id);
            match reach {
                None => {
                    let joined = ack.txn.ack_later(ack.on_end);
                    let _ = reply.send(joined.map_err(Into::into));
                    return;
                }
                Some(short) if short != ack.id => (ack.id, ack.batch_size) = (short, None),
                Some(_) => {}
            }
        }
        let sub = &self.subs[index];
        let (conn, consumer, name) = (sub.conn.clone(), sub.id, sub.name.to_string());
        let subscription = self.settings.options.subscription.clone();
        let kind = if ack.cumulative {
            AckType::Cumulative
        } else {
            AckType::Individual
        };
        let data = ack_id(ack.id, ack.batch_size, ack.cumulative);
        tokio::spawn(async move {
            let op = match ack.txn.ack_on(&name, &subscription, ack.on_end).await {
                Ok(op) => op,
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                    return;
                }
            };
            let txn = ack.txn.id();
            let answer = conn
                .request("ACK", |request| {
                    commands::ack_in(consumer, [data], kind, txn, request)
                })
                .await;
            op.finish(answer.is_ok());
            let _ = reply.send(
                answer
                    .map(drop)
                    .map_err(|source| refused(&name, txn, source)),
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_member_clears_its_own_bit_or_every_bit_up_to_it() {
        let member = MessageId {
            batch_index: 2,
            ..MessageId::new(5, 6)
        };
        assert_eq!(ack_id(member, Some(4), false).ack_set, vec![0b1011]);
        assert_eq!(ack_id(member, Some(4), true).ack_set, vec![0b1000]);
        assert_eq!(ack_id(member, Some(4), true).batch_size, Some(4));
        let plain = ack_id(MessageId::new(5, 6), None, false);
        assert!(plain.ack_set.is_empty());
    }
}
