//! The timeline chart: fault windows per target, then per mode one lane per worker with its
//! grants as bars (accepted and refused styled apart), refused writes as markers, and
//! exclusion violations as red spans over the lanes involved.

use std::collections::BTreeSet;

use super::axis::{self, AXIS_H, LEFT, RIGHT, WIDTH};
use super::downsample::merge_spans;
use super::model::{ModeTimeline, ScenarioReport};
use super::palette::{self, GRANT_OK, GRANT_STALE, PAUSE, REJECTED, STALE_WRITE, VIOLATION};
use super::svg::{Linear, PathData, Svg, time_label};

const TOP: f64 = 6.0;
const FAULT_PITCH: f64 = 14.0;
const FAULT_BAR: f64 = 11.0;
const FAULT_HEAD: f64 = 18.0;
/// Mode header: its label and summary line, then room for violation markers under it.
const MODE_HEAD: f64 = 27.0;
const LANE_PITCH: f64 = 15.0;
const LANE_BAR: f64 = 10.0;
const BLOCK_GAP: f64 = 8.0;
/// Grants closer than this many pixels draw as one bar.
const MERGE_GAP_PX: f64 = 0.75;
/// Narrowest bar drawn, so a 1 ms grant in a 10-minute run is still visible.
const MIN_BAR_PX: f64 = 1.0;

/// Worker indices that appear anywhere in the scenario, so every mode shows the same lanes.
pub(crate) fn workers(s: &ScenarioReport) -> BTreeSet<usize> {
    let mut w = BTreeSet::new();
    for t in s.timeline.values() {
        w.extend(t.grants.iter().map(|g| g.worker));
        w.extend(t.rejected.iter().map(|r| r.worker));
        w.extend(t.pauses.iter().map(|p| p.worker));
        for v in &t.violations {
            w.insert(v.first_worker);
            w.insert(v.second_worker);
        }
    }
    w
}

/// Fault targets in natural order (`n2` before `n10`, nodes before workers).
fn fault_targets(s: &ScenarioReport) -> Vec<String> {
    let set: BTreeSet<(String, u64, String)> = s
        .faults
        .iter()
        .flat_map(|f| f.targets.iter())
        .map(|t| {
            let split = t.find(|c: char| c.is_ascii_digit()).unwrap_or(t.len());
            let (prefix, num) = t.split_at(split);
            (
                prefix.to_string(),
                num.parse().unwrap_or(u64::MAX),
                t.clone(),
            )
        })
        .collect();
    set.into_iter().map(|(_, _, t)| t).collect()
}

/// The timeline SVG of one scenario.
pub(crate) fn render(s: &ScenarioReport) -> String {
    let x = axis::x_scale(s);
    let extent = axis::extent_ms(s);
    let workers: Vec<usize> = workers(s).into_iter().collect();
    let targets = fault_targets(s);
    let modes = palette::ordered_modes(s.timeline.keys().chain(s.modes.keys()));
    let fault_lanes = targets.len().max(1) as f64;
    let faults_h = FAULT_HEAD + fault_lanes * FAULT_PITCH;
    let mode_h = MODE_HEAD + workers.len().max(1) as f64 * LANE_PITCH;
    let plot_bottom = TOP + faults_h + modes.len() as f64 * (BLOCK_GAP + mode_h) + 4.0;
    let height = plot_bottom + AXIS_H;
    let mut svg = Svg::new(
        WIDTH,
        height,
        "timeline",
        &format!("Timeline of scenario {}", s.name),
    );
    axis::draw_time_axis(&mut svg, &x, extent, TOP, plot_bottom);

    // Fault windows also shade every mode block faintly, so cause and effect line up.
    let blocks_top = TOP + faults_h + BLOCK_GAP;
    svg.open("g", &[("class", "fault-shade")]);
    for f in &s.faults {
        let x0 = x.map(f.start_ms as f64);
        let x1 = x.map(f.end_ms.map_or(extent, |e| e as f64));
        let fill = palette::fault_color(&f.kind);
        let (xs, ws) = (
            format!("{:.1}", x0),
            format!("{:.1}", (x1 - x0).max(MIN_BAR_PX)),
        );
        let (ys, hs) = (
            format!("{blocks_top:.1}"),
            format!("{:.1}", plot_bottom - blocks_top),
        );
        svg.leaf(
            "rect",
            &[
                ("x", &xs),
                ("y", &ys),
                ("width", &ws),
                ("height", &hs),
                ("fill", fill),
            ],
            None,
        );
    }
    svg.close();

    draw_faults(&mut svg, s, &x, extent, &targets, TOP);
    let mut y = TOP + faults_h + BLOCK_GAP;
    for mode in modes {
        let empty = ModeTimeline::default();
        let t = s.timeline.get(mode).unwrap_or(&empty);
        draw_mode(&mut svg, mode, t, &x, &workers, y);
        y += mode_h + BLOCK_GAP;
    }
    svg.finish()
}

fn draw_faults(
    svg: &mut Svg,
    s: &ScenarioReport,
    x: &Linear,
    extent: f64,
    targets: &[String],
    top: f64,
) {
    svg.open("g", &[("class", "faults")]);
    svg.text(LEFT - 8.0, top + 13.0, "end", "block-label", "faults");
    if targets.is_empty() {
        svg.text(LEFT + 4.0, top + 13.0, "start", "note", "no faults applied");
    }
    for (i, target) in targets.iter().enumerate() {
        let ly = top + FAULT_HEAD + i as f64 * FAULT_PITCH;
        svg.open("g", &[("class", "fault-lane"), ("data-target", target)]);
        svg.rect(LEFT, ly, WIDTH - RIGHT - LEFT, FAULT_BAR, "lane-bg", None);
        svg.text(
            LEFT - 8.0,
            ly + FAULT_BAR - 1.5,
            "end",
            "lane-label",
            target,
        );
        for f in s.faults.iter().filter(|f| f.targets.contains(target)) {
            let x0 = x.map(f.start_ms as f64);
            let healed = f.end_ms.is_some();
            let x1 = x.map(f.end_ms.map_or(extent, |e| e as f64));
            let w = (x1 - x0).max(2.0);
            let end = f
                .end_ms
                .map_or_else(|| "never healed".to_string(), |e| time_label(e as f64));
            let title = format!(
                "{} {} on {} — {} to {}",
                f.kind,
                f.detail,
                f.targets.join(","),
                time_label(f.start_ms as f64),
                end
            );
            let (xs, ys, ws, hs) = (
                format!("{x0:.1}"),
                format!("{ly:.1}"),
                format!("{w:.1}"),
                format!("{FAULT_BAR:.1}"),
            );
            let class = if healed { "fault" } else { "fault unhealed" };
            svg.leaf(
                "rect",
                &[
                    ("x", &xs),
                    ("y", &ys),
                    ("width", &ws),
                    ("height", &hs),
                    ("class", class),
                    ("fill", palette::fault_color(&f.kind)),
                    ("data-kind", &f.kind),
                ],
                Some(&title),
            );
            // The kind is written inside the window only when it fits (≈6 px per character).
            if w > f.kind.chars().count() as f64 * 6.0 + 6.0 {
                svg.text(
                    x0 + 3.0,
                    ly + FAULT_BAR - 2.0,
                    "start",
                    "fault-text",
                    &f.kind,
                );
            }
        }
        svg.close();
    }
    svg.close();
}

fn draw_mode(svg: &mut Svg, mode: &str, t: &ModeTimeline, x: &Linear, workers: &[usize], top: f64) {
    svg.open("g", &[("class", "mode"), ("data-mode", mode)]);
    svg.text(LEFT - 8.0, top + 12.0, "end", "block-label", mode);
    let accepted = t.grants.iter().filter(|g| g.accepted).count();
    let stale = t.grants.iter().filter(|g| g.stale).count();
    let summary = format!(
        "{} grants ({} accepted) · {} refused writes · {} stale writes · {} pauses · {} violations · {} token regressions",
        t.grants.len(),
        accepted,
        t.rejected.len(),
        stale,
        t.pauses.len(),
        t.violations.len(),
        t.fence_regressions.len()
    );
    svg.text(LEFT + 4.0, top + 12.0, "start", "note", &summary);
    let lane_y = |w: usize| {
        let i = workers.iter().position(|x| *x == w).unwrap_or(0);
        top + MODE_HEAD + i as f64 * LANE_PITCH
    };
    for &w in workers {
        let ly = lane_y(w);
        let ws = w.to_string();
        svg.open(
            "g",
            &[("class", "lane"), ("data-mode", mode), ("data-worker", &ws)],
        );
        svg.rect(LEFT, ly, WIDTH - RIGHT - LEFT, LANE_BAR, "lane-bg", None);
        svg.text(
            LEFT - 8.0,
            ly + LANE_BAR - 1.0,
            "end",
            "lane-label",
            &format!("w{w}"),
        );
        for ok in [true, false] {
            let spans: Vec<(f64, f64)> = t
                .grants
                .iter()
                .filter(|g| g.worker == w && g.accepted == ok)
                .map(|g| (x.map(g.start_ms.as_ms()), x.map(g.end_ms.as_ms())))
                .collect();
            let n = spans.len();
            let mut d = PathData::default();
            for (a, b) in merge_spans(spans, MERGE_GAP_PX) {
                d.rect(a, ly, (b - a).max(MIN_BAR_PX), LANE_BAR);
            }
            let (class, fill) = if ok {
                ("grants accepted", GRANT_OK)
            } else {
                ("grants refused", GRANT_STALE)
            };
            let title = format!(
                "w{w} in {mode}: {n} {} grants",
                if ok { "accepted" } else { "refused" }
            );
            let count = n.to_string();
            svg.path(
                &d,
                &[("class", class), ("fill", fill), ("data-count", &count)],
                Some(&title),
            );
        }
        // Every refused write is drawn (never thinned): a small triangle over the lane.
        let mut d = PathData::default();
        for r in t.rejected.iter().filter(|r| r.worker == w) {
            d.move_to(x.map(r.at_ms.as_ms()) - 3.5, ly - 2.0)
                .h(7.0)
                .rel(-3.5, 6.0)
                .close();
        }
        let count = d.subpaths().to_string();
        let title = format!("w{w} in {mode}: {count} refused writes");
        svg.path(
            &d,
            &[
                ("class", "rejected"),
                ("fill", REJECTED),
                ("data-count", &count),
            ],
            Some(&title),
        );
        // Pauses: a thin bar under the lane, from stop to resume (to the axis end if the
        // scenario ended first).
        let mut d = PathData::default();
        for p in t.pauses.iter().filter(|p| p.worker == w) {
            let a = x.map(p.from_ms.as_ms());
            let b = p.to_ms.map_or(WIDTH - RIGHT, |e| x.map(e.as_ms()));
            d.rect(a, ly + LANE_BAR, (b - a).max(MIN_BAR_PX), 2.5);
        }
        let count = d.subpaths().to_string();
        let title = format!("w{w} in {mode}: {count} pauses while holding a lease");
        svg.path(
            &d,
            &[("class", "pauses"), ("fill", PAUSE), ("data-count", &count)],
            Some(&title),
        );
        // Stale writes (diamonds where the write completed) and tokens that did not grow
        // (bars at the grant), each drawn.
        let mut d = PathData::default();
        for g in t.grants.iter().filter(|g| g.worker == w && g.stale) {
            let cx = x.map(g.done_ms.as_ms());
            d.move_to(cx, ly - 1.0)
                .rel(3.0, 3.0 + LANE_BAR / 2.0 - 2.0)
                .rel(-3.0, 3.0 + LANE_BAR / 2.0 - 2.0)
                .rel(-3.0, -(3.0 + LANE_BAR / 2.0 - 2.0))
                .close();
        }
        for f in t.fence_regressions.iter().filter(|f| f.worker == w) {
            d.rect(x.map(f.at_ms.as_ms()) - 1.0, ly - 2.0, 2.0, LANE_BAR + 4.0);
        }
        let count = d.subpaths().to_string();
        let title = format!(
            "w{w} in {mode}: stale writes (completed after the lease ended) and fencing tokens that did not grow"
        );
        svg.path(
            &d,
            &[
                ("class", "stale-writes"),
                ("fill", STALE_WRITE),
                ("data-count", &count),
            ],
            Some(&title),
        );
        svg.close();
    }
    // Every violation is drawn, over the lanes of both workers, with a marker above them.
    for v in &t.violations {
        let (a, b) = (lane_y(v.first_worker), lane_y(v.second_worker));
        let (y0, y1) = (a.min(b) - 1.0, a.max(b) + LANE_BAR + 1.0);
        let x0 = x.map(v.from_ms.as_ms());
        let x1 = x.map(v.to_ms.as_ms()).max(x0 + 3.0);
        let mut d = PathData::default();
        d.rect(x0, y0, x1 - x0, y1 - y0);
        let mid = (x0 + x1) / 2.0;
        d.move_to(mid - 5.0, top + MODE_HEAD - 11.0)
            .h(10.0)
            .rel(-5.0, 8.0)
            .close();
        let title = format!(
            "exclusion violation in {mode}: w{} and w{} both held the lock {} – {}",
            v.first_worker,
            v.second_worker,
            time_label(v.from_ms.as_ms()),
            time_label(v.to_ms.as_ms())
        );
        svg.path(
            &d,
            &[
                ("class", "violation"),
                ("fill", VIOLATION),
                ("stroke", VIOLATION),
            ],
            Some(&title),
        );
    }
    svg.close();
}
