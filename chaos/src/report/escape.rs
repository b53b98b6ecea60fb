//! Escaping text for HTML and SVG (which we also emit as XML in tests and JUnit).
//!
//! Every string that comes from a report (scenario names, reasons, fault details, the
//! command line) goes through [`escape`] before it reaches markup: the report file is input,
//! and a crafted `report.json` must not be able to inject script into `report.html`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` safe inside element content and inside single- or double-quoted attributes.
///
/// Control characters other than tab, newline and carriage return are not allowed in XML
/// 1.0 (and mean nothing in HTML), so they become U+FFFD; that keeps inline SVG well-formed.
pub fn escape(text: &str) -> Cow<'_, str> {
    let needs = text
        .chars()
        .any(|c| matches!(c, '&' | '<' | '>' | '"' | '\'') || is_forbidden_control(c));
    if !needs {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_forbidden_control(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters XML 1.0 forbids outright (C0 controls other than TAB/LF/CR, and U+FFFE/FFFF).
fn is_forbidden_control(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{FFFE}' || c == '\u{FFFF}'
}

/// A string usable as an HTML `id` built from an index (names can hold anything, so ids
/// never derive from them).
pub(crate) fn anchor(index: usize) -> String {
    let mut s = String::from("scenario-");
    let _ = write!(s, "{index}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(
            escape("<script>alert('x\"&')</script>\u{1}"),
            "&lt;script&gt;alert(&#39;x&quot;&amp;&#39;)&lt;/script&gt;\u{FFFD}"
        );
        assert!(matches!(escape("kill-minority"), Cow::Borrowed(_)));
    }
}
