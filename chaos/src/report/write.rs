//! The report directory: `report.json` (the record), `report.html` (for people),
//! `junit.xml` (for CI), `history/*.jsonl` (every operation of each scenario, see
//! [`crate::checker::history`]) and `evidence/*.json` (everything else each verdict used,
//! see `crate::judge::evidence`), written together; the first three re-render from the JSON
//! alone, and `chaos judge` judges again from the last two.

use std::path::{Path, PathBuf};

use super::error::ReportError;
use super::html::{HTML_FILE, render_html};
use super::junit::{JUNIT_FILE, render_junit};
use super::model::{ChaosReport, REPORT_FILE};
use crate::checker::history::write_jsonl;

/// Where the files of a report directory are.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReportPaths {
    /// `report.json`.
    pub json: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
    /// `junit.xml`.
    pub junit: PathBuf,
}

impl ReportPaths {
    /// The paths inside `dir`.
    pub fn in_dir(dir: &Path) -> ReportPaths {
        ReportPaths {
            json: dir.join(REPORT_FILE),
            html: dir.join(HTML_FILE),
            junit: dir.join(JUNIT_FILE),
        }
    }
}

/// Writes `report.json`, `report.html` and `junit.xml` into `dir` (created if missing).
pub fn write_all(dir: &Path, report: &ChaosReport) -> Result<ReportPaths, ReportError> {
    create_dir(dir)?;
    let paths = ReportPaths::in_dir(dir);
    let json = serde_json::to_vec_pretty(report).map_err(ReportError::Json)?;
    // Renders happen before any write, so a render error leaves the directory as it was.
    let html = render_html(report);
    let junit = render_junit(report)?;
    for s in &report.scenarios {
        if let (Some(rel), Some(json)) = (s.evidence.as_deref(), s.evidence_json.as_deref()) {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                create_dir(parent)?;
            }
            write_atomic(&path, json.as_bytes())?;
        }
        if let Some(rel) = s.history.as_deref().filter(|_| !s.ops.is_empty()) {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                create_dir(parent)?;
            }
            let mut lines = Vec::new();
            write_jsonl(&mut lines, &s.ops).map_err(|source| ReportError::Io {
                action: "writing",
                path: path.clone(),
                source,
            })?;
            write_atomic(&path, &lines)?;
        }
    }
    write_atomic(&paths.json, &json)?;
    write_atomic(&paths.html, html.as_bytes())?;
    write_atomic(&paths.junit, junit.as_bytes())?;
    Ok(paths)
}

/// Reads `dir/report.json`.
pub fn load(dir: &Path) -> Result<ChaosReport, ReportError> {
    let path = dir.join(REPORT_FILE);
    let bytes = std::fs::read(&path).map_err(|source| ReportError::Io {
        action: "reading",
        path: path.clone(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| ReportError::Parse { path, source })
}

/// Re-renders `report.html` and `junit.xml` from `dir/report.json` (which is left as is).
pub fn rerender(dir: &Path) -> Result<(ChaosReport, ReportPaths), ReportError> {
    let report = load(dir)?;
    let paths = ReportPaths::in_dir(dir);
    let html = render_html(&report);
    let junit = render_junit(&report)?;
    write_atomic(&paths.html, html.as_bytes())?;
    write_atomic(&paths.junit, junit.as_bytes())?;
    Ok((report, paths))
}

fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        action: "creating",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes through a temp file and a rename, so a crash or a full disk never leaves a
/// half-written report that `chaos report` would then fail on.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|source| ReportError::Io {
        action: "writing",
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, path).map_err(|source| ReportError::Io {
        action: "renaming into place",
        path: path.to_path_buf(),
        source,
    })
}
