//! Closing a consumer's subscriptions on the broker when its task ends
//! without closing them: the task panicked (a bug, or an interceptor's
//! panic), or its future was dropped (the runtime shut down). Otherwise
//! the broker keeps each consumer, its permits and, on Exclusive, the
//! subscription itself until the shared connection closes.

use std::ops::{Deref, DerefMut};

use super::*;

/// The driver, owned by its task's future. Dropped while armed, it sends
/// CLOSE_CONSUMER for every subscription the broker holds for it, in a
/// task of its own (a `Drop` cannot wait for the answers).
pub(super) struct CloseSubscriptionsOnDrop {
    driver: Driver,
    armed: bool,
}

impl CloseSubscriptionsOnDrop {
    /// Guards `driver`, armed.
    pub(super) fn new(driver: Driver) -> Self {
        Self {
            driver,
            armed: true,
        }
    }

    /// The task closed or unsubscribed its subscriptions itself.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Each subscription the broker holds: not lost, not removed, and not
    /// being made again (an attempt in flight closes what it makes when
    /// it is dropped, see attach.rs).
    fn held(&self) -> Vec<(Connection, ConsumerId)> {
        let driver = &self.driver;
        driver
            .subs
            .iter()
            .enumerate()
            .filter(|(index, sub)| {
                !driver.resubscribes.is_running(*index) && !sub.lost && !sub.removed
            })
            .map(|(_, sub)| (sub.conn.clone(), sub.id))
            .collect()
    }
}

impl Deref for CloseSubscriptionsOnDrop {
    type Target = Driver;

    fn deref(&self) -> &Driver {
        &self.driver
    }
}

impl DerefMut for CloseSubscriptionsOnDrop {
    fn deref_mut(&mut self) -> &mut Driver {
        &mut self.driver
    }
}

impl Drop for CloseSubscriptionsOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let held = self.held();
        if held.is_empty() {
            return;
        }
        warn!(
            consumers = held.len(),
            "consumer task ended without closing; closing its consumers on the broker"
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let closes = held.iter().map(|(conn, id)| conn.close_consumer(*id));
                for (closed, (_, id)) in futures::future::join_all(closes).await.iter().zip(&held) {
                    if let Err(e) = closed {
                        debug!(consumer = id.0, error = %e, "CLOSE_CONSUMER after the task ended failed");
                    }
                }
            });
        }
    }
}
