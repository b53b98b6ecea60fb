//! Acquire latency over time: one dot per successful acquire, one cross per failed one,
//! coloured by mode, on a log scale (quorum rounds take ~1 ms, timeouts take seconds).

use super::axis::{self, AXIS_H, LEFT, RIGHT, WIDTH};
use super::downsample::dedupe_points;
use super::model::ScenarioReport;
use super::palette;
use super::svg::{Log10, PathData, Svg, latency_label};

const TOP: f64 = 8.0;
const PLOT_H: f64 = 150.0;
/// Points closer than this (in pixels) draw once; dots are 3 px wide, so a dense cloud
/// looks the same.
const CELL_PX: f64 = 2.0;
/// Past this many points per mode and kind the grid coarsens, which bounds the file size
/// of long runs (a point costs ~8 bytes).
const MAX_POINTS: usize = 2000;

/// The latency SVG of one scenario.
pub(crate) fn render(s: &ScenarioReport) -> String {
    let x = axis::x_scale(s);
    let extent = axis::extent_ms(s);
    let bottom = TOP + PLOT_H;
    let mut svg = Svg::new(
        WIDTH,
        bottom + AXIS_H,
        "latency",
        &format!("Acquire latency of scenario {}", s.name),
    );
    let samples = s.timeline.values().flat_map(|t| t.acquire.iter());
    let (lo, hi) = samples.fold((f64::MAX, 0f64), |(lo, hi), a| {
        let v = a.latency_us as f64;
        (lo.min(v), hi.max(v))
    });
    axis::draw_time_axis(&mut svg, &x, extent, TOP, bottom);
    if hi <= 0.0 {
        svg.text(
            LEFT + 8.0,
            TOP + 20.0,
            "start",
            "note",
            "no acquire samples recorded",
        );
        return svg.finish();
    }
    // Whole decades, so the gridlines are 100µs, 1ms, 10ms, …
    let lo = 10f64.powf(lo.max(1.0).log10().floor());
    let hi = 10f64.powf(hi.max(lo * 10.0).log10().ceil());
    let y = Log10::new(lo, hi, bottom, TOP);
    svg.open("g", &[("class", "y-axis")]);
    let mut tick = lo;
    while tick <= hi * 1.0001 {
        let py = y.map(tick);
        svg.line(LEFT, py, WIDTH - RIGHT, py, "grid");
        svg.text(LEFT - 6.0, py + 4.0, "end", "tick", &latency_label(tick));
        tick *= 10.0;
    }
    svg.close();
    for mode in palette::ordered_modes(s.timeline.keys()) {
        let Some(t) = s.timeline.get(mode) else {
            continue;
        };
        let color = palette::mode_color(mode);
        for ok in [true, false] {
            let raw: Vec<(f64, f64)> = t
                .acquire
                .iter()
                .filter(|a| a.ok == ok)
                .map(|a| (x.map(a.at_ms.as_ms()), y.map(a.latency_us as f64)))
                .collect();
            let mut cell = CELL_PX;
            let mut pts = dedupe_points(raw.iter().copied(), cell);
            while pts.len() > MAX_POINTS && cell < 8.0 {
                cell += 1.0;
                pts = dedupe_points(raw.iter().copied(), cell);
            }
            // Relative moves: consecutive points are close in x, so deltas are short.
            let mut d = PathData::default();
            let (mut cx, mut cy) = (0.0, 0.0);
            for (px, py) in pts {
                if ok {
                    // A zero-length segment with round caps is a dot: far smaller than <circle>.
                    d.rel_move(px - cx, py - cy).h(0.0);
                    (cx, cy) = (px, py);
                } else {
                    // A cross; the pen ends at its top-right corner.
                    d.rel_move(px - 2.5 - cx, py - 2.5 - cy)
                        .rel(5.0, 5.0)
                        .rel_move(-5.0, 0.0)
                        .rel(5.0, -5.0);
                    (cx, cy) = (px + 2.5, py - 2.5);
                }
            }
            let n = t.acquire.iter().filter(|a| a.ok == ok).count().to_string();
            let title = format!(
                "{mode}: {n} {} acquires",
                if ok { "successful" } else { "failed" }
            );
            let class = if ok { "lat-ok" } else { "lat-fail" };
            svg.path(
                &d,
                &[
                    ("class", class),
                    ("stroke", color),
                    ("data-mode", mode),
                    ("data-count", &n),
                ],
                Some(&title),
            );
        }
    }
    svg.finish()
}
