//! The lost updates of a scenario, each with the write that erased it, as an HTML table.

use std::fmt::Write as _;

use super::escape::escape;
use super::model::{LostUpdate, ScenarioReport};

/// Rows shown per mode; the report keeps up to 500, the history all of them.
const SHOWN: usize = 50;

/// Section ids as `w<worker>#<n>` (see `workload::ledger::section_id`).
fn section(id: u64) -> String {
    format!("w{}#{}", id / 1_000_000, id % 1_000_000)
}

fn at(us: Option<u64>) -> String {
    us.map_or_else(|| "?".into(), |us| format!("{:.1} ms", us as f64 / 1000.0))
}

fn lease(stale: bool) -> &'static str {
    if stale {
        "<td class=\"bad\">after its lease</td>"
    } else {
        "<td>in its lease</td>"
    }
}

/// Nothing when no mode lost a named update.
pub(crate) fn lost_updates(out: &mut String, s: &ScenarioReport, modes: &[&str]) {
    let lost: Vec<(&str, &[LostUpdate])> = modes
        .iter()
        .filter_map(|m| Some((*m, s.timeline.get(*m)?.lost_updates.as_slice())))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if lost.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Lost updates and the writes that erased them</h3>\
         <table class=\"summary lost\"><thead><tr><th>mode</th><th>lost section</th>\
         <th>wrote</th><th>completed</th><th>its write</th><th>erased by</th><th>which read</th>\
         <th>completed</th><th>its write</th><th>explained</th></tr></thead><tbody>",
    );
    for (mode, lost) in lost {
        for l in lost.iter().take(SHOWN) {
            let (culprit, read, written, stale) = match &l.culprit {
                Some(c) => (
                    section(c.section),
                    c.read_value.to_string(),
                    at(c.written_us),
                    lease(c.stale),
                ),
                None => ("?".into(), "?".into(), "?".into(), "<td>?</td>"),
            };
            let _ = write!(
                out,
                "<tr data-mode=\"{m}\"><td>{m}</td><td>{}</td><td>{}</td><td>{}</td>{}\
                 <td>{culprit}</td><td>{read}</td><td>{written}</td>{stale}<td{}>{}</td></tr>",
                section(l.section),
                l.value,
                at(Some(l.written_us)),
                lease(l.stale),
                if l.explained() { "" } else { " class=\"bad\"" },
                if l.explained() {
                    "a stale write"
                } else {
                    "no: two holders at once"
                },
                m = escape(mode),
            );
        }
        if lost.len() > SHOWN {
            let _ = write!(
                out,
                "<tr><td colspan=\"10\">… {} more in report.json and the history</td></tr>",
                lost.len() - SHOWN
            );
        }
    }
    out.push_str("</tbody></table>");
}
