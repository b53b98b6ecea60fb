//! `report.html`: one self-contained page (inline CSS and SVG; no script, font, image or
//! URL), readable offline and safe to attach to a CI run.
//!
//! Layout: the run's identity and an index of scenarios, then per scenario its header
//! (verdict colour-coded, with reasons), the timeline, acquire latency, the counter against
//! the expected count, and the summary table. Charts come from `timeline`,
//! `latency` and `counter` (private modules beside this one).

use std::fmt::Write as _;

use super::escape::{anchor, escape};
use super::model::{ChaosReport, ModeReport, Outcome, ScenarioReport, or_unknown};
use super::palette::{self, GRANT_OK, GRANT_STALE, PAUSE, REJECTED, STALE_WRITE, VIOLATION};
use super::{counter, culprits, latency, timeline};

/// File name of the page inside the report directory.
pub const HTML_FILE: &str = "report.html";

const CSS: &str = r#"
:root{--pass:#1a7f37;--fail:#cf222e;--unavailable:#bc4c00;--unknown:#9a6700;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0}
*{box-sizing:border-box}
body{margin:0;padding:16px 24px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);background:#f6f8fa}
h1{font-size:22px;margin:0 0 6px} h2{font-size:18px;margin:0} h3{font-size:14px;margin:14px 0 4px;color:var(--muted);font-weight:600}
.run,.scenario{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:0 0 18px;max-width:1160px}
.scenario{border-left:6px solid var(--line)}
.scenario.pass{border-left-color:var(--pass)} .scenario.fail{border-left-color:var(--fail)} .scenario.unavailable{border-left-color:var(--unavailable)} .scenario.unknown{border-left-color:var(--unknown)} .scenario.not-applicable{border-left-color:#9e9e9e}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;color:#fff;font-weight:700;font-size:12px;text-transform:uppercase;letter-spacing:.04em;vertical-align:middle}
.badge.pass{background:var(--pass)} .badge.fail{background:var(--fail)} .badge.unavailable{background:var(--unavailable)} .badge.unknown{background:var(--unknown)} .badge.not-applicable{background:#757575}
.meta{color:var(--muted);margin:2px 0} .meta code{font-size:12px}
.head{display:flex;gap:10px;align-items:center}
ul.reasons{margin:6px 0 0;padding-left:20px} ul.reasons li{margin:1px 0}
.scenario.fail ul.reasons{color:#82071e} .scenario.unavailable ul.reasons{color:#762c00}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin-top:4px}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:right} th{background:#f6f8fa;font-weight:600} td:first-child,th:first-child{text-align:left}
td.bad{background:#ffebe9;color:#82071e;font-weight:700}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;color:var(--muted);font-size:12px;margin:2px 0 4px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:14px;height:10px;border-radius:2px}
.sw.line{height:3px} .sw.dash{height:0;border-top:2px dashed}
.chart,.table{overflow-x:auto}
details.met{margin:4px 0 0;color:var(--muted)} details.met summary{cursor:pointer}
svg{display:block;font:11px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
svg .grid{stroke:#eaeef2;stroke-width:1} svg .baseline{stroke:#8c959f}
svg .tick{fill:var(--muted);font-size:10px} svg .note{fill:var(--muted);font-size:11px}
svg .block-label{font-weight:700;fill:var(--ink);font-size:12px} svg .lane-label{fill:var(--muted);font-size:10px}
svg .lane-bg{fill:#f3f5f7} svg .fault{opacity:.85} svg .fault.unhealed{stroke:#cf222e;stroke-width:1.5;stroke-dasharray:4 2}
svg .fault-text{fill:#fff;font-size:9px;font-weight:600;pointer-events:none}
svg .fault-shade rect{opacity:.08}
svg .violation{fill-opacity:.35;stroke-width:1.2}
svg .rejected{stroke:#fff;stroke-width:.5}
svg .lat-ok{fill:none;stroke-width:3;stroke-linecap:round;stroke-opacity:.65}
svg .lat-fail{fill:none;stroke-width:1.4}
svg .value{fill:none;stroke-width:1.8} svg .lost{fill:none;stroke-width:1.6} svg .expected{fill:none;stroke-width:1.4;stroke-dasharray:5 3;opacity:.8}
nav ol{margin:6px 0 0;padding-left:22px} nav li{margin:2px 0}
a{color:#0969da;text-decoration:none} a:hover{text-decoration:underline}
"#;

/// The whole page for a report. Never fails: every value is drawn or escaped as it is.
pub fn render_html(report: &ChaosReport) -> String {
    let mut out = String::with_capacity(256 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>chaos report {} — {}</title><style>{CSS}</style></head><body>",
        escape(&report.run_id),
        outcome_word(report.verdict)
    );
    run_header(&mut out, report);
    for (i, s) in report.scenarios.iter().enumerate() {
        scenario(&mut out, i, s);
    }
    out.push_str("</body></html>\n");
    out
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::Unavailable => "unavailable",
        Outcome::Unknown => "unknown",
        Outcome::NotApplicable => "not-applicable",
    }
}

fn badge(o: Outcome) -> String {
    let w = outcome_word(o);
    format!(
        "<span class=\"badge {w}\" title=\"{}\">{w}</span>",
        escape(o.meaning())
    )
}

fn run_header(out: &mut String, r: &ChaosReport) {
    let _ = write!(
        out,
        "<section class=\"run\"><div class=\"head\"><h1>Chaos run {}</h1>{}</div>\
         <p class=\"meta\">{} · {} backend · {} · {} nodes · lock {} · seed <code>{}</code> · started {}</p>\
         <p class=\"meta\"><code>{}</code></p><nav><ol>",
        escape(&r.run_id),
        badge(r.verdict),
        escape(&r.flavour),
        escape(&r.backend),
        escape(&r.server_version),
        r.nodes,
        escape(&r.lock),
        r.seed,
        escape(&r.started_at),
        escape(&r.command),
    );
    for (i, s) in r.scenarios.iter().enumerate() {
        let lost = or_unknown(s.modes.values().map(|m| m.lost).sum());
        let viol: u64 = s.modes.values().map(|m| m.exclusion_violations).sum();
        let _ = write!(
            out,
            "<li><a href=\"#{}\">{}</a> {} <span class=\"meta\">lost {lost} · violations {viol}</span></li>",
            anchor(i),
            escape(&s.name),
            badge(s.verdict.outcome)
        );
    }
    out.push_str("</ol></nav></section>");
}

fn scenario(out: &mut String, i: usize, s: &ScenarioReport) {
    let w = outcome_word(s.verdict.outcome);
    let _ = write!(
        out,
        "<section class=\"scenario {w}\" id=\"{}\"><div class=\"head\"><h2>{}</h2>{}</div>\
         <p class=\"meta\">{}</p><p class=\"meta\"><b>Expected:</b> {}</p>\
         <p class=\"meta\">seed <code>{}</code> · planned {} s · {} faults{}</p><ul class=\"reasons\">",
        anchor(i),
        escape(&s.name),
        badge(s.verdict.outcome),
        escape(&s.about),
        escape(&s.expected),
        s.seed,
        s.duration_ms as f64 / 1000.0,
        s.faults.len(),
        if s.clients.is_empty() {
            String::new()
        } else {
            format!(" · clients: {}", escape(&s.clients))
        },
    );
    // What failed and what was measured come first; the checks that passed (20 or more per
    // scenario) fold away, so the charts are not pushed below the fold.
    let (met, rest): (Vec<&String>, Vec<&String>) =
        s.verdict.reasons.iter().partition(|r| r.starts_with("ok:"));
    for r in rest {
        let _ = write!(out, "<li>{}</li>", escape(r));
    }
    out.push_str("</ul>");
    if !met.is_empty() {
        let _ = write!(
            out,
            "<details class=\"met\"><summary>{} checks met</summary><ul class=\"reasons\">",
            met.len()
        );
        for r in met {
            let _ = write!(out, "<li>{}</li>", escape(r));
        }
        out.push_str("</ul></details>");
    }
    out.push_str("<h3>Timeline</h3>");
    timeline_legend(out);
    let _ = write!(out, "<div class=\"chart\">{}</div>", timeline::render(s));
    let modes = palette::ordered_modes(s.modes.keys().chain(s.timeline.keys()));
    out.push_str("<h3>Acquire latency</h3>");
    mode_legend(out, &modes, LegendKind::Latency);
    let _ = write!(out, "<div class=\"chart\">{}</div>", latency::render(s));
    out.push_str("<h3>Counter against expected</h3>");
    mode_legend(out, &modes, LegendKind::Counter);
    let _ = write!(out, "<div class=\"chart\">{}</div>", counter::render(s));
    out.push_str("<h3>Summary</h3>");
    summary_table(out, s, &modes);
    culprits::lost_updates(out, s, &modes);
    out.push_str("</section>");
}

fn timeline_legend(out: &mut String) {
    let _ = write!(
        out,
        "<div class=\"legend\">\
         <span><i class=\"sw\" style=\"background:{GRANT_OK}\"></i>grant, write accepted</span>\
         <span><i class=\"sw\" style=\"background:{GRANT_STALE}\"></i>grant, write refused</span>\
         <span><i class=\"sw\" style=\"background:{REJECTED};width:8px;clip-path:polygon(0 0,100% 0,50% 100%)\"></i>refused write</span>\
         <span><i class=\"sw\" style=\"background:{VIOLATION};opacity:.6\"></i>exclusion violation</span>\
         <span><i class=\"sw\" style=\"background:{PAUSE};height:3px\"></i>worker paused holding a lease</span>\
         <span><i class=\"sw\" style=\"background:{STALE_WRITE};width:8px;clip-path:polygon(50% 0,100% 50%,50% 100%,0 50%)\"></i>stale write</span>\
         <span><i class=\"sw\" style=\"background:{STALE_WRITE};width:2px\"></i>fencing token did not grow</span>"
    );
    for (kind, color) in palette::FAULT_KINDS {
        let _ = write!(
            out,
            "<span><i class=\"sw\" style=\"background:{color}\"></i>{kind}</span>"
        );
    }
    out.push_str("</div>");
}

#[derive(Clone, Copy)]
enum LegendKind {
    Latency,
    Counter,
}

fn mode_legend(out: &mut String, modes: &[&str], kind: LegendKind) {
    out.push_str("<div class=\"legend\">");
    for m in modes {
        let c = palette::mode_color(m);
        let _ = write!(
            out,
            "<span><i class=\"sw line\" style=\"background:{c}\"></i>{}</span>",
            escape(m)
        );
    }
    match kind {
        LegendKind::Latency => out.push_str("<span>● acquired</span><span>✕ not acquired</span>"),
        LegendKind::Counter => out.push_str(
            "<span><i class=\"sw line\" style=\"background:#57606a\"></i>counter value</span>\
             <span><i class=\"sw dash\" style=\"border-color:#57606a\"></i>expected (completed sections)</span>\
             <span>lower panel: expected − value (lost so far)</span>",
        ),
    }
    out.push_str("</div>");
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn summary_table(out: &mut String, s: &ScenarioReport, modes: &[&str]) {
    out.push_str(
        "<div class=\"table\"><table class=\"summary\"><thead><tr><th>mode</th><th>sections</th><th>lost</th>\
         <th>lost %</th><th>stale writes</th><th>rejected</th><th>abandoned</th>\
         <th>violations</th><th>token regressions</th><th>pauses</th><th>acquires</th>\
         <th>failed</th><th>errors</th><th>p50</th><th>p99</th><th>stalls</th>\
         <th>idle faults</th><th>slowest resume</th><th>final value</th></tr></thead><tbody>",
    );
    for mode in modes {
        let Some(m) = s.modes.get(*mode) else {
            continue;
        };
        let ModeReport {
            lock: _,
            sections,
            lost,
            rejected,
            exclusion_violations,
            longest_overlap_us: _,
            acquire_attempts,
            acquire_failures,
            acquire_errors,
            acquire_p50_us,
            acquire_p99_us,
            stalls,
            final_value,
            abandoned,
            stale_writes,
            fence_regressions,
            pauses,
            idle_fault_windows,
            stale_reach: _,
            unexplained_losses: _,
            indeterminate_writes: _,
            server_truth: _,
            validity_cuts: _,
            leaks: _,
            recovery,
            loss_heard: _,
            // In the verdict's reasons, where judged.
            hand_offs: _,
            take_overs: _,
            late_retirements: _,
        } = m;
        let resume = recovery
            .worst_resume_ms
            .map_or_else(|| "–".into(), |r| format!("{r} ms"));
        let (lost, final_value) = (or_unknown(*lost), or_unknown(*final_value));
        let bad = |b: bool| if b { " class=\"bad\"" } else { "" };
        let _ = write!(
            out,
            "<tr data-mode=\"{}\"><td>{}</td><td>{sections}</td><td{}>{lost}</td><td>{:.1}</td>\
             <td{}>{stale_writes}</td><td>{rejected}</td><td>{abandoned}</td>\
             <td{}>{exclusion_violations}</td><td{}>{fence_regressions}</td><td>{pauses}</td>\
             <td>{acquire_attempts}</td><td>{acquire_failures}</td>\
             <td>{acquire_errors}</td><td>{}</td><td>{}</td><td>{stalls}</td><td{}>{idle_fault_windows}</td><td{}>{resume}</td><td>{final_value}</td></tr>",
            escape(mode),
            escape(mode),
            bad(m.lost != Some(0)),
            100.0 * m.lost_share(),
            bad(*stale_writes > 0),
            bad(*exclusion_violations > 0),
            bad(*fence_regressions > 0),
            ms(*acquire_p50_us),
            ms(*acquire_p99_us),
            bad(*idle_fault_windows > 0),
            bad(recovery.late > 0),
        );
    }
    out.push_str("</tbody></table></div>");
}
