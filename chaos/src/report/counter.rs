//! The counter against what it should be: per mode, the counter row's value (solid) and the
//! completed sections (dashed); under it, their difference — increments lost so far — which a
//! loss of 7 in 3000 makes visible where the two lines above overlap.

use super::axis::{self, AXIS_H, LEFT, RIGHT, WIDTH};
use super::downsample::m4;
use super::model::{CounterSample, ScenarioReport};
use super::palette;
use super::svg::{Linear, N, PathData, Svg, nice_ticks};

const TOP: f64 = 8.0;
const PLOT_H: f64 = 125.0;
/// The lost-so-far panel under the counter.
const GAP: f64 = 14.0;
const LOST_H: f64 = 56.0;
/// Lines keep first/min/max/last per this many pixels: a lost-increment dip stays visible.
const COLUMN_PX: f64 = 2.0;

/// Completed sections the counter does not hold. Never below 0: a sample may read a write
/// that committed before its section's completion reached the rig (the sampler counts
/// completions first, see `run::play`), which is not an increment gained.
fn lost_so_far(c: &CounterSample) -> i64 {
    c.expected.saturating_sub(c.value).max(0)
}

/// The counter SVG of one scenario.
pub(crate) fn render(s: &ScenarioReport) -> String {
    let x = axis::x_scale(s);
    let extent = axis::extent_ms(s);
    let bottom = TOP + PLOT_H;
    let (lost_top, lost_bottom) = (bottom + GAP, bottom + GAP + LOST_H);
    let mut svg = Svg::new(
        WIDTH,
        lost_bottom + AXIS_H,
        "counter",
        &format!("Counter against expected count, scenario {}", s.name),
    );
    let max = s
        .timeline
        .values()
        .flat_map(|t| t.counter.iter())
        .map(|c| c.value.max(c.expected))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let min = s
        .timeline
        .values()
        .flat_map(|t| t.counter.iter())
        .map(|c| c.value.min(c.expected))
        .min()
        .unwrap_or(0)
        .min(0) as f64;
    let max_lost = s
        .timeline
        .values()
        .flat_map(|t| t.counter.iter())
        .map(lost_so_far)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    axis::draw_time_axis(&mut svg, &x, extent, TOP, lost_bottom);
    svg.line(LEFT, bottom, WIDTH - RIGHT, bottom, "baseline");
    let y = Linear::new(min, max, bottom, TOP);
    let y_lost = Linear::new(0.0, max_lost, lost_bottom, lost_top);
    svg.open("g", &[("class", "y-axis lost-axis")]);
    svg.text(
        LEFT - 6.0,
        lost_top + 4.0,
        "end",
        "tick",
        &format!("lost {}", N(max_lost)),
    );
    svg.text(LEFT - 6.0, lost_bottom, "end", "tick", "0");
    svg.line(LEFT, lost_top, WIDTH - RIGHT, lost_top, "grid");
    svg.close();
    svg.open("g", &[("class", "y-axis")]);
    for t in nice_ticks(min, max, 4) {
        let py = y.map(t);
        svg.line(LEFT, py, WIDTH - RIGHT, py, "grid");
        svg.text(LEFT - 6.0, py + 4.0, "end", "tick", &N(t).to_string());
    }
    svg.close();
    let mut any = false;
    for mode in palette::ordered_modes(s.timeline.keys()) {
        let Some(t) = s.timeline.get(mode) else {
            continue;
        };
        if t.counter.is_empty() {
            continue;
        }
        any = true;
        let mut samples: Vec<_> = t.counter.iter().collect();
        samples.sort_by_key(|c| c.at_ms);
        let color = palette::mode_color(mode);
        let lost: Vec<(f64, f64)> = samples
            .iter()
            .map(|c| (x.map(c.at_ms.as_ms()), lost_so_far(c) as f64))
            .collect();
        let mut d = PathData::default();
        for (i, (px, v)) in m4(&lost, COLUMN_PX).into_iter().enumerate() {
            if i == 0 {
                d.move_to(px, y_lost.map(v));
            } else {
                d.line_to(px, y_lost.map(v));
            }
        }
        let end_lost = lost.last().map_or(0.0, |p| p.1);
        svg.path(
            &d,
            &[("class", "lost"), ("stroke", color), ("data-mode", mode)],
            Some(&format!("{mode}: {} lost at the end", N(end_lost))),
        );
        for (class, expected) in [("expected", true), ("value", false)] {
            let pts: Vec<(f64, f64)> = samples
                .iter()
                .map(|c| {
                    let v = if expected { c.expected } else { c.value };
                    (x.map(c.at_ms.as_ms()), v as f64)
                })
                .collect();
            let mut d = PathData::default();
            for (i, (px, v)) in m4(&pts, COLUMN_PX).into_iter().enumerate() {
                if i == 0 {
                    d.move_to(px, y.map(v));
                } else {
                    d.line_to(px, y.map(v));
                }
            }
            let last = samples
                .last()
                .map_or(0, |c| if expected { c.expected } else { c.value });
            let title = format!(
                "{mode}: {} {last} at the end",
                if expected {
                    "expected (completed sections)"
                } else {
                    "counter value"
                }
            );
            svg.path(
                &d,
                &[("class", class), ("stroke", color), ("data-mode", mode)],
                Some(&title),
            );
        }
    }
    if !any {
        svg.text(
            LEFT + 8.0,
            TOP + 20.0,
            "start",
            "note",
            "no counter samples recorded",
        );
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::Ms;

    #[test]
    fn a_write_seen_before_its_completion_is_no_loss_and_no_gain() {
        let c = |value, expected| CounterSample {
            at_ms: Ms::from_duration(std::time::Duration::ZERO),
            value,
            expected,
        };
        assert_eq!(lost_so_far(&c(10, 10)), 0);
        assert_eq!(lost_so_far(&c(11, 10)), 0);
        assert_eq!(lost_so_far(&c(7, 10)), 3);
    }
}
