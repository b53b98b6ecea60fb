//! Progress of a long command counted in units of work (sections, runs): a bar on a
//! terminal, a plain line every few seconds otherwise — what is done, what remains, and an
//! estimate from the rate so far.
//!
//! The work adds to a shared counter ([`Meter::counter`]) from wherever it runs; a ticker
//! task reads it. [`Meter::now`] says what is running (the last part of every line and of
//! the bar). Lines about finished parts go through [`Meter::println`], so on a terminal
//! they print above the bar instead of through it.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often a plain line is written when stderr is not a terminal.
pub const LINE_INTERVAL: Duration = Duration::from_secs(10);

/// A running meter; [`finish`](Meter::finish) it (dropping also stops the ticker).
#[derive(Debug)]
pub struct Meter {
    done: Arc<AtomicU64>,
    now: Arc<Mutex<String>>,
    bar: Option<ProgressBar>,
    ticker: JoinHandle<()>,
}

impl Meter {
    /// Starts metering `total` units named `unit` for `label`: bars when stderr is a
    /// terminal, else a line every [`LINE_INTERVAL`].
    pub fn start(label: &str, unit: &'static str, total: u64) -> Meter {
        if std::io::stderr().is_terminal() {
            Self::bar(label, unit, total, ProgressDrawTarget::stderr())
        } else {
            Self::lines(label, unit, total, LINE_INTERVAL)
        }
    }

    /// A meter writing a plain line to stderr every `interval`.
    pub fn lines(label: &str, unit: &'static str, total: u64, interval: Duration) -> Meter {
        let done = Arc::new(AtomicU64::new(0));
        let now = Arc::new(Mutex::new(String::new()));
        let (label, counter, running) = (label.to_owned(), Arc::clone(&done), Arc::clone(&now));
        let ticker = tokio::spawn(async move {
            let started = Instant::now();
            let mut tick = tokio::time::interval_at(started + interval, interval);
            loop {
                tick.tick().await;
                let n = counter.load(Ordering::Relaxed);
                let text = {
                    let now = running.lock().unwrap_or_else(PoisonError::into_inner);
                    line(&label, unit, n, total, started.elapsed(), &now)
                };
                eprintln!("{text}");
            }
        });
        Meter {
            done,
            now,
            bar: None,
            ticker,
        }
    }

    fn bar(label: &str, unit: &'static str, total: u64, target: ProgressDrawTarget) -> Meter {
        let done = Arc::new(AtomicU64::new(0));
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let template = format!(
            "{{prefix:.bold}} [{{bar:30.cyan/blue}}] {{human_pos}}/{{human_len}} {unit} · {{elapsed}} · ~{{eta}} left {{msg}}"
        );
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        let (counter, b) = (Arc::clone(&done), bar.clone());
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                b.set_position(counter.load(Ordering::Relaxed));
            }
        });
        Meter {
            done,
            now: Arc::new(Mutex::new(String::new())),
            bar: Some(bar),
            ticker,
        }
    }

    /// The counter the work adds its finished units to.
    pub fn counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.done)
    }

    /// Says what is running now (replaces the previous text; empty says nothing).
    pub fn now(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(if text.is_empty() {
                String::new()
            } else {
                format!("· {text}")
            }),
            None => {
                let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
                text.clone_into(&mut now);
            }
        }
    }

    /// Prints `text` on stderr (above the bar, on a terminal).
    pub fn println(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    /// Stops the ticker and clears the bar.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.ticker.abort();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `fencing-table: 120,000/450,000 sections (26.7 %) · 1m40s elapsed · ~4m35s left`, then
/// ` · now: {now}` unless `now` is empty; no estimate before the first unit is done.
pub fn line(
    label: &str,
    unit: &str,
    done: u64,
    total: u64,
    elapsed: Duration,
    now: &str,
) -> String {
    let pct = if total == 0 {
        100.0
    } else {
        done as f64 * 100.0 / total as f64
    };
    let left = if done == 0 {
        "estimate after the first".to_owned()
    } else {
        let rest = total.saturating_sub(done) as f64 / done as f64;
        format!("~{} left", hms(elapsed.mul_f64(rest.min(1e6))))
    };
    let mut text = format!(
        "{label}: {}/{} {unit} ({pct:.1} %) · {} elapsed · {left}",
        thousands(done),
        thousands(total),
        hms(elapsed)
    );
    if !now.is_empty() {
        text.push_str(" · now: ");
        text.push_str(now);
    }
    text
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_done_total_and_an_estimate_from_the_rate() {
        let l = line(
            "fencing-table",
            "sections",
            120_000,
            450_000,
            Duration::from_secs(100),
            "",
        );
        assert_eq!(
            l,
            "fencing-table: 120,000/450,000 sections (26.7 %) · 1m40s elapsed · ~4m35s left"
        );
        let start = line("t", "runs", 0, 45, Duration::from_secs(3), "");
        assert_eq!(
            start,
            "t: 0/45 runs (0.0 %) · 3s elapsed · estimate after the first"
        );
        let end = line("t", "runs", 45, 45, Duration::from_secs(3700), "");
        assert!(end.ends_with("1h01m40s elapsed · ~0s left"), "{end}");
        let running = line(
            "bench",
            "cases",
            7,
            18,
            Duration::from_secs(120),
            "round 2/3: throughput",
        );
        assert_eq!(
            running,
            "bench: 7/18 cases (38.9 %) · 2m00s elapsed · ~3m08s left · now: round 2/3: throughput"
        );
    }

    #[tokio::test]
    async fn the_ticker_runs_until_the_meter_finishes() {
        let m = Meter::lines("t", "units", 10, Duration::from_millis(20));
        m.counter().fetch_add(4, Ordering::Relaxed);
        m.now("round 1/3: healthy");
        assert_eq!(*m.now.lock().unwrap(), "round 1/3: healthy");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!m.ticker.is_finished());
        let ticker = m.ticker.abort_handle();
        m.finish();
        for _ in 0..100 {
            if ticker.is_finished() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the ticker outlived its meter");
    }
}
