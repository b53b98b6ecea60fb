//! Colours and orders shared by the charts and their HTML legends, so they always agree.
//!
//! The mode colours are ColorBrewer "Dark2" (distinguishable with the common colour-vision
//! deficiencies); red is reserved for exclusion violations.

/// Modes in table order; unknown keys (a newer runner) follow in name order.
pub(crate) const MODE_ORDER: [&str; 4] = ["none", "checked", "write_only", "claim_first"];

/// Grants whose write was accepted.
pub(crate) const GRANT_OK: &str = "#4a90d9";
/// Grants whose write was refused (stale token).
pub(crate) const GRANT_STALE: &str = "#f0a030";
/// Refused-write markers.
pub(crate) const REJECTED: &str = "#5a2d00";
/// Exclusion violations.
pub(crate) const VIOLATION: &str = "#d62728";
/// A worker paused while holding a lease.
pub(crate) const PAUSE: &str = "#9467bd";
/// Stale writes (accepted after the lease ended) and fencing tokens that did not grow.
pub(crate) const STALE_WRITE: &str = "#e7298a";

/// The modes of a scenario in display order.
pub(crate) fn ordered_modes<'a>(keys: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = keys.into_iter().map(String::as_str).collect();
    keys.sort_by_key(|k| {
        (
            MODE_ORDER
                .iter()
                .position(|m| m == k)
                .unwrap_or(MODE_ORDER.len()),
            *k,
        )
    });
    keys.dedup();
    keys
}

/// Line and point colour of a mode.
pub(crate) fn mode_color(mode: &str) -> &'static str {
    match mode {
        "none" => "#d95f02",
        "checked" => "#e6ab02",
        "write_only" => "#7570b3",
        "claim_first" => "#1b9e77",
        _ => "#666666",
    }
}

/// Fill of a fault window by kind (the runner's kind names; others are grey).
pub(crate) fn fault_color(kind: &str) -> &'static str {
    match kind {
        "kill" | "restart" | "amnesia" | "amnesia-restart" => "#7f7f7f",
        "freeze" | "pause" => "#9467bd",
        "partition" => "#8c564b",
        // A late retirement is one client's requests slowed.
        "slow" | "latency" | "retire-late" => "#17becf",
        "clock-jump" | "clock-skew" | "clock" => "#bcbd22",
        "client-stall" | "stall" | "client-pause" | "task-pause" => "#e377c2",
        _ => "#a0a0a0",
    }
}

/// Every fault kind with its own colour, for the legend.
pub(crate) const FAULT_KINDS: [(&str, &str); 6] = [
    ("kill / restart", "#7f7f7f"),
    ("freeze", "#9467bd"),
    ("partition", "#8c564b"),
    ("slow", "#17becf"),
    ("clock-jump / skew", "#bcbd22"),
    ("client-stall / pause", "#e377c2"),
];
