//! The partitions a producer writes to, and following a partitioned topic
//! as partitions are added: every `every` (60 s by default, as Java's
//! `autoUpdatePartitionsInterval`) a task of its own asks
//! PARTITIONED_METADATA, creates a producer on each new partition and
//! hands it to the router, so sends reach the new partitions without a
//! restart. A count that shrank, or an error, is logged and ignored. The
//! task holds the producer weakly: it stops once every handle is gone or
//! the producer is closed.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use tracing::{info, warn};

use super::Inner;
use super::connect::{self, Recipe};
use super::routing::Router;
use super::task::{self, Lane, Settings};
use crate::client::{Client, TopicName};

/// The partitions' lanes and the router over them.
#[derive(Debug)]
pub(crate) struct Lanes {
    pub(crate) lanes: Vec<Lane>,
    pub(crate) router: Router,
    /// Set by `close`: no partition is added after it.
    pub(crate) closed: bool,
}

impl Lanes {
    /// The lane for a message with key `key`, sent now (the clock is read
    /// only when there is a choice).
    pub(crate) fn choose(&mut self, key: Option<&str>) -> Lane {
        let index = if self.lanes.len() == 1 {
            0
        } else {
            self.router.choose(crate::clock::now(), key) as usize
        };
        self.lanes[index].clone()
    }
}

/// Makes a partition's recipe from its topic and index.
pub(crate) type MakeRecipe = Box<dyn Fn(&TopicName, i32) -> Recipe + Send + Sync>;

/// What following the partitions needs.
pub(crate) struct Follow {
    pub(crate) client: Client,
    pub(crate) topic: TopicName,
    pub(crate) every: Duration,
    /// A partition's recipe from its topic and index.
    pub(crate) recipe: MakeRecipe,
    pub(crate) settings: Settings,
}

/// Checks for new partitions every `follow.every` while `producer` lives.
pub(crate) async fn follow(producer: Weak<Inner>, follow: Follow) {
    loop {
        tokio::time::sleep(follow.every).await;
        let known = match producer.upgrade() {
            Some(inner) => {
                let lanes = lock(&inner.lanes);
                if lanes.closed {
                    return;
                }
                lanes.lanes.len() as u32
            }
            None => return,
        };
        let count = match follow
            .client
            .partitioned_topic_metadata(&follow.topic)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                warn!(topic = %follow.topic, error = %e, "checking for new partitions failed; ignored until the next check");
                continue;
            }
        };
        if count < known {
            warn!(topic = %follow.topic, known, now = count, "partition count shrank; ignored");
            continue;
        }
        if count == known {
            continue;
        }
        let recipes: Vec<Recipe> = (known..count)
            .map(|n| {
                (follow.recipe)(
                    &follow.topic.partition(n),
                    i32::try_from(n).unwrap_or(i32::MAX),
                )
            })
            .collect();
        // Created producers not handed over close themselves when dropped.
        let created = match futures::future::try_join_all(recipes.iter().map(connect::create)).await
        {
            Ok(created) => created,
            Err(e) => {
                warn!(topic = %follow.topic, error = %e, "creating producers on new partitions failed; trying again at the next check");
                continue;
            }
        };
        let Some(inner) = producer.upgrade() else {
            return;
        };
        let mut lanes = lock(&inner.lanes);
        if lanes.closed || lanes.lanes.len() as u32 != known {
            return;
        }
        for (c, recipe) in created.into_iter().zip(recipes) {
            lanes
                .lanes
                .push(task::spawn(c, recipe, follow.settings.clone()));
        }
        lanes.router.set_partitions(count);
        info!(topic = %follow.topic, from = known, to = count, "producing to new partitions");
    }
}

/// The lanes, also after a panic elsewhere while they were held.
pub(crate) fn lock(lanes: &Mutex<Lanes>) -> std::sync::MutexGuard<'_, Lanes> {
    lanes.lock().unwrap_or_else(|e| e.into_inner())
}
