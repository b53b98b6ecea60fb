//! Scenario files: TOML, or JSON when the name ends in `.json`, read into [`Scenario`]s.
//!
//! A TOML file holds one scenario; a JSON file one scenario object, or an array of them
//! (so the whole of `chaos scenarios --json` is a valid file). Every error names the file,
//! the line when there is one, and the field:
//!
//! ```text
//! km.toml:9: field `recipe.window.on`: [0.3, 1.4] is not a range of fractions of the run: use values from 0 to 1 (0.1 = 10 % of --duration)
//! km.toml:3: field `expectaton`: unknown field `expectaton`, expected one of `name`, `about`, ...
//! ```
//!
//! Types are checked while parsing (with the position of the offending value); the rules
//! between fields ([`validate::check`]) right after, so nothing is started with a file
//! that cannot be played.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Scenario;
use super::validate::{self, SpecError};

/// The formats a scenario file may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// One scenario.
    Toml,
    /// One scenario, or an array of them.
    Json,
}

impl Format {
    /// By extension: `.json` is JSON, `.toml` TOML.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(Format::Toml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// What is wrong in a scenario text, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Path of the field, e.g. `recipe.window.max_on`; `None` for syntax errors.
    pub field: Option<String>,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// A scenario file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioFileError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither `.toml` nor `.json`.
    #[error("{}: unknown format: name the file *.toml or *.json (YAML is not read)", path.display())]
    Format {
        /// The file.
        path: PathBuf,
    },
    /// It does not parse, or breaks a rule.
    #[error("{}{}", path.display(), located(.error))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and what.
        error: ParseError,
    },
}

fn located(e: &ParseError) -> String {
    let mut out = String::new();
    if let Some(line) = e.line {
        out.push_str(&format!(":{line}"));
    }
    out.push_str(": ");
    if let Some(field) = &e.field {
        out.push_str(&format!("field `{field}`: "));
    }
    out.push_str(&e.message);
    out
}

impl ScenarioFileError {
    /// The field it names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioFileError::Invalid { error, .. } => error.field.as_deref(),
            _ => None,
        }
    }
}

/// The scenarios in `path`, parsed and checked.
///
/// # Errors
/// Unreadable file, unknown extension, or the first problem in it (file, line, field).
pub fn load(path: &Path) -> Result<Vec<Scenario>, ScenarioFileError> {
    let format = Format::of(path).ok_or_else(|| ScenarioFileError::Format {
        path: path.to_owned(),
    })?;
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, format).map_err(|error| ScenarioFileError::Invalid {
        path: path.to_owned(),
        error,
    })
}

/// The scenarios in `text`, parsed and checked.
///
/// # Errors
/// The first problem, with its line and field.
pub fn parse(text: &str, format: Format) -> Result<Vec<Scenario>, ParseError> {
    let scenarios = match format {
        Format::Toml => vec![parse_toml(text)?],
        Format::Json => parse_json(text)?,
    };
    for (i, s) in scenarios.iter().enumerate() {
        validate::check(s).map_err(|e| {
            let e = if scenarios.len() > 1 || text.trim_start().starts_with('[') {
                e.within(&format!("[{i}]"))
            } else {
                e
            };
            let key = e.field.split(['.', '[']).next().unwrap_or_default();
            ParseError {
                line: line_of_key(text, key),
                field: Some(e.field),
                message: e.message,
            }
        })?;
    }
    Ok(scenarios)
}

fn parse_toml(text: &str) -> Result<Scenario, ParseError> {
    let located = |field: Option<String>, e: toml::de::Error| {
        let line = e.span().map(|s| line_at(text, s.start));
        split_field(line, field, e.message().trim_end().to_owned())
    };
    let de = toml::Deserializer::parse(text).map_err(|e| located(None, e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_path(e.path());
        located(field, e.into_inner())
    })
}

fn parse_json(text: &str) -> Result<Vec<Scenario>, ParseError> {
    let located = |field: Option<String>, e: serde_json::Error| {
        let line = (e.line() > 0).then_some(e.line());
        // serde_json appends " at line L column C"; the line is reported on its own.
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m)
            .to_owned();
        split_field(line, field, message)
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let scenarios = if text.trim_start().starts_with('[') {
        serde_path_to_error::deserialize(&mut de)
    } else {
        serde_path_to_error::deserialize(&mut de).map(|s: Scenario| vec![s])
    }
    .map_err(|e| {
        let field = field_path(e.path());
        located(field, e.into_inner())
    })?;
    de.end().map_err(|e| located(None, e))?;
    Ok(scenarios)
}

/// `None` for the document itself.
fn field_path(p: &serde_path_to_error::Path) -> Option<String> {
    let s = p.to_string();
    (s != "." && !s.is_empty()).then_some(s)
}

/// Rules checked while parsing report `field `x`: message` relative to the value they
/// were checked on; fold `x` into the path.
fn split_field(line: Option<usize>, field: Option<String>, message: String) -> ParseError {
    if let Some(rest) = message.strip_prefix("field `")
        && let Some((inner, msg)) = rest.split_once("`: ")
    {
        let e = SpecError::new(inner, msg);
        let e = match &field {
            Some(f) => e.within(f),
            None => e,
        };
        return ParseError {
            line,
            field: Some(e.field),
            message: e.message,
        };
    }
    ParseError {
        line,
        field,
        message,
    }
}

/// 1-based line of byte `offset`.
fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |t| t.bytes().filter(|b| *b == b'\n').count())
        + 1
}

/// First line that sets top-level `key` (`key =`, `[key]`, `[[key]]`, `"key":`).
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l.trim_start_matches('[');
            let quoted = format!("\"{key}\"");
            [key, quoted.as_str()].iter().any(|k| {
                l.strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with(['=', ':', ']', '.']))
            })
        })
        .map(|i| i + 1)
}
