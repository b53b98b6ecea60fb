//! The chaos rig for `fenced-redlock` (work in progress).
