//! Plain-text rendering of a [`BenchReport`]: the rows, the CPU ceiling of the rows that have
//! one, then the ratios with pass/miss.

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
    let bounded: Vec<_> = r
        .cases
        .iter()
        .filter(|row| row.ceiling_ops_per_s.is_some())
        .collect();
    if !bounded.is_empty() {
        let _ = writeln!(
            s,
            "\nCPU ceiling (cores left to the servers / the servers' CPU per op, each client's own; docs/performance.md):"
        );
        let _ = writeln!(
            s,
            "{:<22} {:<16} {:>10} {:>10} {:>8} {:>9} {:>8} {:>11}",
            "case", "client", "ops/s", "ceiling", "of it", "srv/op", "cores", "srv r/w/op"
        );
        for row in bounded {
            let _ = writeln!(
                s,
                "{:<22} {:<16} {:>10} {:>10} {:>8} {:>9} {:>8} {:>11}",
                row.case,
                row.client,
                row.ops_per_s.map_or("-".into(), |o| format!("{o:.0}")),
                row.ceiling_ops_per_s
                    .map_or("-".into(), |o| format!("{o:.0}")),
                row.of_ceiling
                    .map_or("-".into(), |f| format!("{:.1}%", f * 100.0)),
                row.server_cpu_us_per_op
                    .map_or("-".into(), |c| format!("{c:.1}µs")),
                row.server_cores.map_or("-".into(), |c| format!("{c:.2}")),
                match (row.server_reads_per_op, row.server_writes_per_op) {
                    (Some(r), Some(w)) => format!("{r:.2}/{w:.2}"),
                    _ => "-".into(),
                },
            );
        }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::bench::{AppendFsync, Machine, Row};

    fn report(cases: Vec<Row>) -> BenchReport {
        BenchReport {
            cases,
            ratios: BTreeMap::new(),
            machine: Machine {
                cpus: 2,
                cpu_model: "test".into(),
                kernel: "6".into(),
                loadavg_1m: None,
                server: "valkey 8".into(),
                node_timeout_ms: 100,
                ttl_ms: 10_000,
                quick: true,
                appendfsync: AppendFsync::Everysec,
                repeat: 1,
            },
            date: "2026-12-05T05:00:00Z".into(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn ceiling_block_only_for_rows_with_a_ceiling() {
        let plain = Row::skipped("healthy", "ours", "");
        assert!(!render(&report(vec![plain.clone()])).contains("CPU ceiling"));
        let bounded = Row {
            ops_per_s: Some(10_000.0),
            server_cpu_us_per_op: Some(100.0),
            server_cores: Some(1.3),
            ceiling_ops_per_s: Some(13_000.0),
            of_ceiling: Some(10.0 / 13.0),
            server_reads_per_op: Some(5.5),
            server_writes_per_op: Some(10.0),
            ..Row::skipped("throughput", "ours", "")
        };
        let text = render(&report(vec![plain, bounded]));
        let block = text
            .split_once("CPU ceiling")
            .map(|(_, b)| b)
            .expect("a ceiling block");
        let line = block
            .lines()
            .find(|l| l.starts_with("throughput"))
            .expect("the bounded row");
        for want in ["10000", "13000", "76.9%", "100.0µs", "1.30", "5.50/10.00"] {
            assert!(line.contains(want), "{want} in {line}");
        }
        assert!(!block.lines().any(|l| l.starts_with("healthy")), "{block}");
    }
}
