//! Pure keepalive state: when to PING, and when the broker counts as dead.
//!
//! Every `interval` the actor calls [`Keepalive::on_tick`]. If nothing came
//! from the broker since the previous PING, the connection is dead;
//! otherwise a new PING goes out. A silent broker is therefore declared dead
//! at most two intervals after the last frame it sent. Like the Java client,
//! any inbound frame counts as a sign of life, not only PONG: a busy
//! connection whose PONG is queued behind messages stays up.

use std::time::{Duration, Instant};

/// What the actor must do at a keepalive tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write a PING.
    SendPing,
    /// The previous PING got no answer: close the connection.
    Dead,
}

/// Ping/pong bookkeeping for one connection.
#[derive(Debug)]
pub(crate) struct Keepalive {
    interval: Duration,
    next_tick: Instant,
    awaiting: bool,
}

impl Keepalive {
    /// Starts the clock at `now`: the first PING goes out one interval later.
    pub(crate) fn new(now: Instant, interval: Duration) -> Self {
        Self {
            interval,
            next_tick: crate::clock::after(now, interval),
            awaiting: false,
        }
    }

    /// The interval in force.
    pub(crate) const fn interval(&self) -> Duration {
        self.interval
    }

    /// When [`on_tick`](Self::on_tick) next has something to do.
    pub(crate) const fn next_deadline(&self) -> Instant {
        self.next_tick
    }

    /// Called with the current time; returns an action once per interval.
    pub(crate) fn on_tick(&mut self, now: Instant) -> Option<Action> {
        if now < self.next_tick {
            return None;
        }
        if self.awaiting {
            return Some(Action::Dead);
        }
        self.awaiting = true;
        self.next_tick = crate::clock::after(now, self.interval);
        Some(Action::SendPing)
    }

    /// Any frame from the broker (PONG included) proves it alive.
    pub(crate) fn on_activity(&mut self) {
        self.awaiting = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn an_interval_of_duration_max_never_overflows() {
        let t0 = crate::clock::now();
        let mut k = Keepalive::new(t0, Duration::MAX);
        assert!(k.next_deadline() > t0 + secs(3600));
        assert_eq!(k.on_tick(t0 + secs(3600)), None);
    }

    #[test]
    fn nothing_before_the_first_interval() {
        let t0 = crate::clock::now();
        let mut k = Keepalive::new(t0, secs(30));
        assert_eq!(k.on_tick(t0 + secs(29)), None);
        assert_eq!(k.next_deadline(), t0 + secs(30));
    }

    #[test]
    fn pings_every_interval_while_the_broker_answers() {
        let t0 = crate::clock::now();
        let mut k = Keepalive::new(t0, secs(30));
        assert_eq!(k.on_tick(t0 + secs(30)), Some(Action::SendPing));
        assert_eq!(k.on_tick(t0 + secs(31)), None, "one ping per interval");
        k.on_activity();
        assert_eq!(k.on_tick(t0 + secs(60)), Some(Action::SendPing));
        k.on_activity();
        assert_eq!(k.next_deadline(), t0 + secs(90));
    }

    #[test]
    fn unanswered_ping_is_death_at_the_next_tick() {
        let t0 = crate::clock::now();
        let mut k = Keepalive::new(t0, secs(30));
        assert_eq!(k.on_tick(t0 + secs(30)), Some(Action::SendPing));
        assert_eq!(k.on_tick(t0 + secs(59)), None);
        assert_eq!(k.on_tick(t0 + secs(60)), Some(Action::Dead));
        assert!(k.next_deadline() <= t0 + 2 * k.interval());
    }

    #[test]
    fn a_late_tick_still_pings_first() {
        // A runtime that wakes late must not count the missed interval as death.
        let t0 = crate::clock::now();
        let mut k = Keepalive::new(t0, secs(30));
        assert_eq!(k.on_tick(t0 + secs(95)), Some(Action::SendPing));
        assert_eq!(k.next_deadline(), t0 + secs(125));
    }
}
