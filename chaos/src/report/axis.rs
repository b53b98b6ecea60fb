//! The time axis every chart of a scenario shares: same width, same left gutter, same scale,
//! so a fault, a latency spike and a counter dip line up vertically on the page.

use super::model::ScenarioReport;
use super::svg::{Linear, Svg, nice_ticks, time_label};

/// Width of every chart, in pixels.
pub(crate) const WIDTH: f64 = 1100.0;
/// Room for lane and axis labels on the left.
pub(crate) const LEFT: f64 = 96.0;
/// Room on the right (the last tick label overhangs).
pub(crate) const RIGHT: f64 = 18.0;
/// Height of the axis drawn under a plot.
pub(crate) const AXIS_H: f64 = 22.0;

/// The scenario's time range in ms: its planned length, stretched to anything recorded later
/// (a slow heal, a last write) so nothing falls off the right edge.
pub(crate) fn extent_ms(s: &ScenarioReport) -> f64 {
    let mut end = s.duration_ms as f64;
    for f in &s.faults {
        end = end.max(f.end_ms.unwrap_or(f.start_ms) as f64);
    }
    for t in s.timeline.values() {
        let last = |v: f64, e: &mut f64| *e = e.max(v);
        for g in &t.grants {
            last(g.end_ms.as_ms(), &mut end);
        }
        for r in &t.rejected {
            last(r.at_ms.as_ms(), &mut end);
        }
        for v in &t.violations {
            last(v.to_ms.as_ms(), &mut end);
        }
        for a in &t.acquire {
            last(a.at_ms.as_ms(), &mut end);
        }
        for c in &t.counter {
            last(c.at_ms.as_ms(), &mut end);
        }
    }
    if end > 0.0 { end } else { 1.0 }
}

/// Milliseconds to x pixels.
pub(crate) fn x_scale(s: &ScenarioReport) -> Linear {
    Linear::new(0.0, extent_ms(s), LEFT, WIDTH - RIGHT)
}

/// Vertical grid lines from `top` to `bottom` and time labels under `bottom`.
pub(crate) fn draw_time_axis(svg: &mut Svg, x: &Linear, extent_ms: f64, top: f64, bottom: f64) {
    svg.open("g", &[("class", "axis")]);
    for t in nice_ticks(0.0, extent_ms, 10) {
        let px = x.map(t);
        svg.line(px, top, px, bottom, "grid");
        svg.text(px, bottom + 14.0, "middle", "tick", &time_label(t));
    }
    svg.line(LEFT, bottom, WIDTH - RIGHT, bottom, "baseline");
    svg.close();
}
