//! Plain-text rendering of a [`BenchReport`]: the rows, then the ratios with pass/miss.

use std::fmt::Write as _;

use super::BenchReport;

fn us(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 10_000.0 => format!("{:.1}ms", v / 1000.0),
        Some(v) => format!("{v:.0}µs"),
    }
}

/// The table as printed by `chaos bench`.
pub fn render(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "chaos bench — {} — {} (appendfsync {}) — {} cpus — {}{} — {} round(s), medians",
        r.date,
        r.machine.server,
        r.machine.appendfsync.as_str(),
        r.machine.cpus,
        r.machine.cpu_model,
        if r.machine.quick { " — quick" } else { "" },
        r.machine.repeat
    );
    let _ = writeln!(
        s,
        "{:<22} {:<16} {:>9} {:>19} {:>9} {:>10} {:>7} {:>7} {:>5} {:>4}  note",
        "case", "client", "p50", "p50 range", "p99", "ops/s", "cpu/op", "samples", "t/o", "err"
    );
    for row in &r.cases {
        let range = match row.p50_range_us {
            Some([lo, hi]) if row.rounds > 1 => format!("{}–{}", us(Some(lo)), us(Some(hi))),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<22} {:<16} {:>9} {:>19} {:>9} {:>10} {:>7} {:>7} {:>5} {:>4}  {}",
            row.case,
            row.client,
            us(row.p50_us),
            range,
            us(row.p99_us),
            row.ops_per_s.map_or("-".into(), |o| format!("{o:.0}")),
            row.cpu_us_per_op
                .map_or("-".into(), |c| format!("{c:.1}µs")),
            row.samples,
            row.timeouts,
            row.errors,
            row.note.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(s, "\nratios (targets are reported, not asserted):");
    for (name, ratio) in &r.ratios {
        let verdict = match ratio.pass {
            Some(true) => "pass",
            Some(false) => "MISS",
            None => "n/a",
        };
        let value = ratio.value.map_or("-".into(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "  {name:<34} {value:>8}  target {:<10} {verdict}  {}",
            ratio.target, ratio.meaning
        );
    }
    for note in &r.notes {
        let _ = writeln!(s, "note: {note}");
    }
    s
}
