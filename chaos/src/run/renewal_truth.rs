//! Server truth after background renewals: a renewed section reads its lease's keys on the
//! servers after a renewal its watch saw ([`super::lease_watch`]), against the validity
//! the renewer announced with it — a renewer that announces more than its renewal gave the
//! keys (counted from the reply, say, or after a renewal that failed on a quorum) is
//! caught where holding windows cannot see it. Each read is a [`WorkerEvent::Truth`],
//! judged like the read after a grant or an explicit extend
//! ([`crate::checker::truth`]).
//!
//! At a bounded rate: no read starts sooner than `gap` after the last one started (the
//! runner passes the TTL, a renewal being due every third of it), and one read at a time
//! (each is bounded by [`super::truth::READ_DEADLINE`] per node). The read runs beside the
//! section, never in its way: [`RenewalTruth::next`] is one more branch of the section's
//! `select!`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use super::clock::ScenarioClock;
use super::truth::TruthReader;
use crate::judge::events::WorkerEvent;

/// A read in flight: it hands the reader back with its event.
type Reading<'r> = Pin<Box<dyn Future<Output = (&'r mut TruthReader, WorkerEvent)> + Send + 'r>>;

/// The reads of one renewed section's lease after its renewals.
pub struct RenewalTruth<'r> {
    key: &'r [u8],
    token: &'r [u8],
    clock: ScenarioClock,
    gap: Duration,
    idle: Option<&'r mut TruthReader>,
    reading: Option<Reading<'r>>,
    last_start: Option<Instant>,
    events: Vec<WorkerEvent>,
}

impl std::fmt::Debug for RenewalTruth<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenewalTruth")
            .field("gap", &self.gap)
            .field("reading", &self.reading.is_some())
            .field("last_start", &self.last_start)
            .field("events", &self.events.len())
            .finish_non_exhaustive()
    }
}

impl<'r> RenewalTruth<'r> {
    /// Reads of `key` held with `token` through `reader` (none: no server truth in this
    /// run), no more often than every `gap`.
    pub fn new(
        reader: Option<&'r mut TruthReader>,
        key: &'r [u8],
        token: &'r [u8],
        clock: ScenarioClock,
        gap: Duration,
    ) -> Self {
        RenewalTruth {
            key,
            token,
            clock,
            gap,
            idle: reader,
            reading: None,
            last_start: None,
            events: Vec::new(),
        }
    }

    /// The renewer announced `valid_until`, seen at `now`: read the keys against it, unless
    /// a read is in flight, one started less than `gap` ago, or the validity is over.
    pub fn renewed(&mut self, valid_until: Instant, now: Instant) {
        let due = self.last_start.is_none_or(|l| now >= l + self.gap);
        if !due || now >= valid_until {
            return;
        }
        let Some(reader) = self.idle.take() else {
            return;
        };
        self.last_start = Some(now);
        let (key, token, clock) = (self.key, self.token, self.clock);
        self.reading = Some(Box::pin(async move {
            let truth = reader.read(key, token, clock).await;
            let event = WorkerEvent::Truth {
                truth,
                valid_until_us: clock.us(valid_until),
            };
            (reader, event)
        }));
    }

    /// Completes the read in flight (pending forever when there is none: a `select!`
    /// branch beside the section).
    pub async fn next(&mut self) {
        match self.reading.as_mut() {
            Some(read) => {
                let (reader, event) = read.await;
                self.reading = None;
                self.idle = Some(reader);
                self.events.push(event);
            }
            None => std::future::pending().await,
        }
    }

    /// Ends the reads (the one in flight completes, bounded by its deadline): the reader
    /// back, and the events to emit.
    pub async fn finish(mut self) -> (Option<&'r mut TruthReader>, Vec<WorkerEvent>) {
        if self.reading.is_some() {
            self.next().await;
        }
        (self.idle, self.events)
    }
}
