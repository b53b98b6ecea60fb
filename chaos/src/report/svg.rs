//! A minimal SVG writer: scales, tick choice, compact path data, and elements whose text and
//! attribute values are always escaped.
//!
//! Charts are plain SVG drawn by our own code so `report.html` needs no script, font or
//! network; numbers are rounded to 0.1 px, which is below what a screen shows and keeps the
//! file small.

use std::fmt::{self, Write as _};

use super::escape::escape;

/// A number rounded to 0.1, written without a trailing `.0`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct N(pub(crate) f64);

impl fmt::Display for N {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Non-finite values would make the SVG invalid; they only come from bad input.
        let v = if self.0.is_finite() { self.0 } else { 0.0 };
        let tenths = (v * 10.0).round() as i64;
        if tenths % 10 == 0 {
            write!(f, "{}", tenths / 10)
        } else {
            let sign = if tenths < 0 { "-" } else { "" };
            let a = tenths.unsigned_abs();
            write!(f, "{sign}{}.{}", a / 10, a % 10)
        }
    }
}

/// Linear map from a data range onto a pixel range (clamped, so outliers stay on the chart).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Linear {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Linear {
    pub(crate) fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Linear {
        // A zero-width domain (one sample, or an empty run) still has to map somewhere.
        let d1 = if d1 > d0 { d1 } else { d0 + 1.0 };
        Linear { d0, d1, r0, r1 }
    }

    pub(crate) fn map(&self, v: f64) -> f64 {
        let v = if v.is_finite() { v } else { self.d0 };
        let t = ((v - self.d0) / (self.d1 - self.d0)).clamp(0.0, 1.0);
        self.r0 + t * (self.r1 - self.r0)
    }
}

/// Log10 map for latencies, which span 100 µs to seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Log10(Linear);

impl Log10 {
    pub(crate) fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Log10 {
        let lo = d0.max(1.0).log10();
        let hi = d1.max(d0.max(1.0) * 10.0).log10();
        Log10(Linear::new(lo, hi, r0, r1))
    }

    pub(crate) fn map(&self, v: f64) -> f64 {
        self.0.map(v.max(1.0).log10())
    }
}

/// Up to about `max` round tick values covering `[lo, hi]` (steps of 1, 2 or 5 × 10^k).
pub(crate) fn nice_ticks(lo: f64, hi: f64, max: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || max == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / max as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 && out.len() <= max + 1 {
        out.push(v);
        v += step;
    }
    out
}

/// Milliseconds as a short axis label: `0`, `250ms`, `12s`, `1m30s`.
pub(crate) fn time_label(ms: f64) -> String {
    if ms <= 0.0 {
        "0".into()
    } else if ms < 1000.0 {
        format!("{}ms", N(ms))
    } else if ms < 120_000.0 {
        format!("{}s", N(ms / 1000.0))
    } else {
        let s = (ms / 1000.0).round() as u64;
        if s.is_multiple_of(60) {
            format!("{}m", s / 60)
        } else {
            format!("{}m{}s", s / 60, s % 60)
        }
    }
}

/// Microseconds as a short latency label: `250µs`, `1.5ms`, `2s`.
pub(crate) fn latency_label(us: f64) -> String {
    if us < 1000.0 {
        format!("{}µs", N(us))
    } else if us < 1_000_000.0 {
        format!("{}ms", N(us / 1000.0))
    } else {
        format!("{}s", N(us / 1_000_000.0))
    }
}

/// Compact path data (`M`, `h`, `v`, `l`, `z`), built command by command.
#[derive(Debug, Default)]
pub(crate) struct PathData {
    d: String,
    subpaths: usize,
}

impl PathData {
    pub(crate) fn move_to(&mut self, x: f64, y: f64) -> &mut Self {
        self.subpaths += 1;
        let _ = write!(self.d, "M{} {}", N(x), N(y));
        self
    }
    /// A line to `(x, y)`; must follow a `move_to` or `line_to` (written as an implicit
    /// lineto, a bare coordinate pair, which saves a byte per point on long lines).
    pub(crate) fn line_to(&mut self, x: f64, y: f64) -> &mut Self {
        let _ = write!(self.d, " {} {}", N(x), N(y));
        self
    }
    /// A relative move (starts a subpath).
    pub(crate) fn rel_move(&mut self, dx: f64, dy: f64) -> &mut Self {
        self.subpaths += 1;
        let _ = write!(self.d, "m{} {}", N(dx), N(dy));
        self
    }
    pub(crate) fn rel(&mut self, dx: f64, dy: f64) -> &mut Self {
        let _ = write!(self.d, "l{} {}", N(dx), N(dy));
        self
    }
    pub(crate) fn h(&mut self, dx: f64) -> &mut Self {
        let _ = write!(self.d, "h{}", N(dx));
        self
    }
    pub(crate) fn v(&mut self, dy: f64) -> &mut Self {
        let _ = write!(self.d, "v{}", N(dy));
        self
    }
    pub(crate) fn close(&mut self) -> &mut Self {
        self.d.push('z');
        self
    }
    /// An axis-aligned rectangle as one subpath.
    pub(crate) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64) -> &mut Self {
        self.move_to(x, y).h(w).v(h).h(-w).close()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.d.is_empty()
    }
    /// Number of `M` commands (markers drawn), for `data-count`.
    pub(crate) fn subpaths(&self) -> usize {
        self.subpaths
    }
    pub(crate) fn as_str(&self) -> &str {
        &self.d
    }
}

/// An SVG document being written. Attribute values and text are escaped here, so callers
/// can pass report strings straight in.
#[derive(Debug)]
pub(crate) struct Svg {
    buf: String,
    open: Vec<&'static str>,
}

impl Svg {
    /// `<svg>` of this pixel size; `label` is read by screen readers.
    pub(crate) fn new(width: f64, height: f64, class: &str, label: &str) -> Svg {
        let mut buf = String::with_capacity(16 * 1024);
        // No xmlns: inline SVG in HTML does not need it, and the page then holds no URL.
        let _ = write!(
            buf,
            "<svg class=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
            escape(class),
            N(width),
            N(height),
            N(width),
            N(height),
            escape(label)
        );
        Svg {
            buf,
            open: vec!["svg"],
        }
    }

    fn attrs(&mut self, attrs: &[(&str, &str)]) {
        for (k, v) in attrs {
            let _ = write!(self.buf, " {k}=\"{}\"", escape(v));
        }
    }

    /// Opens an element that will hold children (closed by [`Svg::close`]).
    pub(crate) fn open(&mut self, name: &'static str, attrs: &[(&str, &str)]) {
        let _ = write!(self.buf, "<{name}");
        self.attrs(attrs);
        self.buf.push('>');
        self.open.push(name);
    }

    /// Closes the innermost open element.
    pub(crate) fn close(&mut self) {
        if let Some(name) = self.open.pop() {
            let _ = write!(self.buf, "</{name}>");
        }
    }

    /// An element with no children except an optional tooltip.
    pub(crate) fn leaf(&mut self, name: &str, attrs: &[(&str, &str)], title: Option<&str>) {
        let _ = write!(self.buf, "<{name}");
        self.attrs(attrs);
        match title {
            Some(t) => {
                let _ = write!(self.buf, "><title>{}</title></{name}>", escape(t));
            }
            None => self.buf.push_str("/>"),
        }
    }

    pub(crate) fn rect(
        &mut self,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        class: &str,
        title: Option<&str>,
    ) {
        let (x, y, w, h) = (
            N(x).to_string(),
            N(y).to_string(),
            N(w.max(0.0)).to_string(),
            N(h.max(0.0)).to_string(),
        );
        self.leaf(
            "rect",
            &[
                ("x", &x),
                ("y", &y),
                ("width", &w),
                ("height", &h),
                ("class", class),
            ],
            title,
        );
    }

    pub(crate) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = write!(
            self.buf,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"{}\"/>",
            N(x1),
            N(y1),
            N(x2),
            N(y2),
            escape(class)
        );
    }

    /// Text; `anchor` is `start`, `middle` or `end`.
    pub(crate) fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, content: &str) {
        let _ = write!(
            self.buf,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" class=\"{}\">{}</text>",
            N(x),
            N(y),
            escape(anchor),
            escape(class),
            escape(content)
        );
    }

    /// A path (skipped when empty: `d=""` is an error in some viewers).
    pub(crate) fn path(&mut self, d: &PathData, attrs: &[(&str, &str)], title: Option<&str>) {
        if d.is_empty() {
            return;
        }
        let mut all: Vec<(&str, &str)> = vec![("d", d.as_str())];
        all.extend_from_slice(attrs);
        self.leaf("path", &all, title);
    }

    /// Closes everything still open and returns the markup.
    pub(crate) fn finish(mut self) -> String {
        while !self.open.is_empty() {
            self.close();
        }
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_to_tenths() {
        assert_eq!(N(1.0).to_string(), "1");
        assert_eq!(N(1.26).to_string(), "1.3");
        assert_eq!(N(-0.44).to_string(), "-0.4");
        assert_eq!(N(f64::NAN).to_string(), "0");
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 60_000.0, 6),
            vec![
                0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0, 60_000.0
            ]
        );
        assert_eq!(nice_ticks(5.0, 5.0, 6), vec![5.0]);
        assert_eq!(time_label(90_000.0), "90s");
        assert_eq!(time_label(180_000.0), "3m");
        assert_eq!(latency_label(1500.0), "1.5ms");
    }

    #[test]
    fn svg_escapes_text_and_closes_elements() {
        let mut s = Svg::new(10.0, 10.0, "c", "<x>");
        s.open("g", &[("data-name", "a\"b")]);
        s.text(0.0, 0.0, "start", "t", "<script>");
        let out = s.finish();
        assert!(out.contains("aria-label=\"&lt;x&gt;\""));
        assert!(out.contains("data-name=\"a&quot;b\""));
        assert!(out.contains("&lt;script&gt;"));
        assert!(out.ends_with("</g></svg>"));
    }
}
