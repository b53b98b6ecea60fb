//! What can go wrong writing or reading a report directory.

use std::path::PathBuf;

/// Writing, reading or rendering a report failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A file or directory operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What we were doing, e.g. `writing`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `report.json` is not a report this version understands.
    #[error("reading {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The report could not be serialized to JSON.
    #[error("serializing the report: {0}")]
    Json(#[source] serde_json::Error),
    /// The JUnit XML could not be produced.
    #[error("writing JUnit XML: {0}")]
    Junit(#[from] quick_junit::SerializeError),
}
