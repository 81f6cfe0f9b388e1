//! Carries out a simulation's faults, each once the broker has seen its
//! number of changes.

use std::sync::Arc;
use std::time::Duration;

use crate::message_id::MessageId;
use crate::proto::ServerError;

use super::plan::{Fault, FaultKind};
use super::roles::{SUBSCRIPTION, Stage};

/// Refused SENDs per `fail-sends`.
const REFUSED: usize = 3;
/// How late SENDs are confirmed during `slow-sends`, and for how long.
const SLOW: Duration = Duration::from_secs(2);
const SLOW_FOR: Duration = Duration::from_secs(5);

/// Fires `faults` in order; returns how many fired (the run may end
/// before the broker sees the changes a late one waits for).
pub(crate) async fn inject(
    stage: Arc<Stage>,
    faults: Vec<Fault>,
    fired: Arc<std::sync::atomic::AtomicUsize>,
) {
    for fault in faults {
        stage.broker.wait_for_changes(fault.at).await;
        fire(&stage, fault.kind).await;
        fired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The topic's own name and its partitions'.
fn names(stage: &Stage) -> Vec<String> {
    match stage.workload.partitions {
        0 => vec![stage.topic.clone()],
        n => (0..n)
            .map(|i| format!("{}-partition-{i}", stage.topic))
            .collect(),
    }
}

async fn fire(stage: &Arc<Stage>, kind: FaultKind) {
    let on_consumers = matches!(kind, FaultKind::Seek | FaultKind::Rejoin);
    if on_consumers && stage.live_consumers().is_empty() {
        // Every consumer is leaving or joining: nothing is rewound or ended.
        stage.journal().fault_idle(kind);
        return;
    }
    stage.journal().fault(kind);
    let broker = &stage.broker;
    match kind {
        FaultKind::Cut => broker.disconnect_all(),
        FaultKind::Unload => broker.unload(&stage.topic),
        FaultKind::CloseConsumers => broker.close_consumers(&stage.topic),
        FaultKind::ResetCursor => broker.reset_cursor(&stage.topic, SUBSCRIPTION),
        FaultKind::FailSends => {
            for name in names(stage) {
                broker.fail_sends(&name, REFUSED, ServerError::PersistenceError);
            }
        }
        FaultKind::SlowSends => {
            for name in names(stage) {
                broker.slow_sends(&name, SLOW);
            }
            let (broker, names) = (broker.clone(), names(stage));
            tokio::spawn(async move {
                tokio::time::sleep(SLOW_FOR).await;
                for name in names {
                    broker.slow_sends(&name, Duration::ZERO);
                }
            });
        }
        FaultKind::Seek => {
            if let Some((_, consumer)) = stage.live_consumers().first() {
                let (consumer, stage) = (consumer.clone(), stage.clone());
                let began = stage.journal().epoch;
                tokio::spawn(async move {
                    let result = consumer.seek(MessageId::EARLIEST).await;
                    stage.journal().rewound(began, result.err());
                });
            }
        }
        FaultKind::Rejoin => {
            let live = stage.live_consumers();
            let pick = stage.journal().faults.len() % live.len();
            let (instance, consumer) = live[pick].clone();
            // Leaving from now on: a rejoin that comes before the close
            // returns picks another (on Exclusive, none), so no more
            // consumers join than leave.
            let next = {
                let mut all = stage.consumers.lock().unwrap_or_else(|e| e.into_inner());
                all[instance] = None;
                all.push(None);
                all.len() - 1
            };
            let joining = stage.clone();
            let rejoin = tokio::spawn(async move {
                let stage = joining;
                if let Err(e) = consumer.close().await {
                    stage
                        .journal()
                        .violation(format!("closing consumer {instance} failed: {e}"));
                }
                match stage.subscribe(next).await {
                    Ok(consumer) => stage.start_consumer(next, consumer),
                    Err(e) => stage
                        .journal()
                        .violation(format!("consumer {next} could not join: {e}")),
                }
            });
            stage
                .rejoins
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(rejoin);
        }
    }
}
