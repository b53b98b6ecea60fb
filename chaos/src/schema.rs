//! JSON Schemas of the documents the rig writes and reads, derived from the serde types
//! they are written from and read into, so they cannot drift from them.
//!
//! The four [`Document`]s are the files in `docs/schema/` (draft 2020-12):
//! - `report.json` ([`ChaosReport`]), the bench JSON ([`BenchReport`]) and the
//!   fencing-table JSON ([`TableResult`]), as the rig writes them: every field it always
//!   writes is required, and objects hold nothing else.
//! - scenario files ([`Scenario`], or a JSON array of them), as `chaos run --scenario-file`
//!   reads them: fields with a default may be left out, unknown ones are refused.
//!
//! `chaos schema --write docs/schema` rewrites the files; `chaos/tests/schemas.rs` fails
//! when a committed one is not its type's, and checks real output against them.
//!
//! Descriptions are the types' doc comments, each paragraph on one line and rustdoc links
//! as plain code. What the types cannot say, the schemas get from `#[schemars(...)]` beside
//! the field:
//! a range (`pause_rate` in `[0, 1]`), a pattern (scenario names, fault targets), the
//! strings a `String` field takes (`backend`, `flavour`), the mode names as map keys.
//! Rules between values (a range's `lo ≤ hi`, a timeline entry's `end` after its
//! `start`, a fault's targets of the kind it hits) are the loaders' alone
//! ([`crate::scenario::validate`]).

use std::borrow::Cow;
use std::path::Path;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use crate::bench::BenchReport;
use crate::report::model::ChaosReport;
use crate::scenario::Scenario;
use crate::workload::TableResult;

/// A document with a schema in `docs/schema/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Document {
    /// `report.json`, written by `chaos run` into its report directory.
    Report,
    /// `chaos bench --json` / `--json-out FILE`.
    Bench,
    /// `chaos fencing-table --json` / `--json-out FILE`.
    FencingTable,
    /// A scenario file (`chaos run --scenario-file`), and `chaos scenarios --json`.
    Scenario,
}

impl Document {
    /// Every document, in the order of their file names.
    pub const ALL: [Document; 4] = [
        Document::Bench,
        Document::FencingTable,
        Document::Report,
        Document::Scenario,
    ];

    /// Its schema's file name in `docs/schema/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Document::Report => "report.schema.json",
            Document::Bench => "bench.schema.json",
            Document::FencingTable => "fencing-table.schema.json",
            Document::Scenario => "scenario.schema.json",
        }
    }

    /// The schema, derived from the document's type.
    pub fn schema(self) -> Schema {
        let mut schema = match self {
            Document::Report => written::<ChaosReport>(),
            Document::Bench => written::<BenchReport>(),
            Document::FencingTable => written::<TableResult>(),
            Document::Scenario => read::<ScenarioFile>(),
        };
        schema.insert("title".into(), self.title().into());
        schema.insert("description".into(), self.description().into());
        schema
    }

    /// The schema's title: the command that writes or reads the document.
    fn title(self) -> &'static str {
        match self {
            Document::Report => "chaos run report.json",
            Document::Bench => "chaos bench --json",
            Document::FencingTable => "chaos fencing-table --json",
            Document::Scenario => "chaos scenario file",
        }
    }

    /// What the document is, where it comes from, and the type it is derived from.
    fn description(self) -> &'static str {
        match self {
            Document::Report => {
                "Written by `chaos run` into its report directory (chaos/src/report/model.rs, \
                 ChaosReport). Times are milliseconds since the scenario's start on one \
                 monotonic clock (µs where named _us). Fields may be added in later schema \
                 versions, never renamed."
            }
            Document::Bench => {
                "Printed by `chaos bench --json`, written by `chaos bench --json-out FILE` \
                 (chaos/src/bench/mod.rs, BenchReport)."
            }
            Document::FencingTable => {
                "Printed by `chaos fencing-table --json`, written by `chaos fencing-table \
                 --json-out FILE` (chaos/src/workload/table.rs, TableResult)."
            }
            Document::Scenario => {
                "A scenario for `chaos run --scenario-file FILE` (TOML, or JSON when FILE ends \
                 in .json; a JSON file may hold an array of them). `chaos scenarios --json` \
                 prints the built-ins in this format (chaos/src/scenario/, Scenario)."
            }
        }
    }

    /// The schema as its file holds it: pretty JSON and a final newline.
    pub fn to_json(self) -> String {
        let mut text = serde_json::to_string_pretty(&self.schema())
            .expect("a schema is a JSON value, with string keys");
        text.push('\n');
        text
    }
}

/// The schema of `T` as the rig writes it: every field it always writes is required, and
/// objects hold nothing else.
fn written<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(closed))
        .with_transform(RecursiveTransform(plain_description))
        .into_generator()
        .into_root_schema_for::<T>()
}

/// The schema of `T` as the rig reads it: fields with a default may be left out.
fn read<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_deserialize()
        .with_transform(RecursiveTransform(plain_description))
        .into_generator()
        .into_root_schema_for::<T>()
}

/// Writes every document's schema into `dir` (`docs/schema/`).
///
/// # Errors
/// The first file that could not be written.
pub fn write(dir: &Path) -> std::io::Result<()> {
    for doc in Document::ALL {
        std::fs::write(dir.join(doc.file_name()), doc.to_json())?;
    }
    Ok(())
}

/// An object the rig writes holds its declared fields and nothing else (serde writes no
/// others); a map keeps the `additionalProperties` it has.
fn closed(schema: &mut Schema) {
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_none() {
        schema.insert("additionalProperties".into(), false.into());
    }
}

/// A doc comment as a description: each paragraph on one line, rustdoc links as plain code.
fn plain_description(schema: &mut Schema) {
    if let Some(Value::String(doc)) = schema.get_mut("description") {
        *doc = plain(doc);
    }
}

fn plain(doc: &str) -> String {
    let paragraphs: Vec<String> = doc
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .collect();
    unlink(&paragraphs.join("\n\n"))
}

/// ``[`x`]`` and ``[`x`](path)`` as `` `x` ``.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[`") {
        out.push_str(&rest[..open]);
        // From the code span's opening backtick.
        let code = &rest[open + 1..];
        let end = code[1..].find('`').map(|i| i + 2);
        match end {
            Some(end) if code[end..].starts_with(']') => {
                out.push_str(&code[..end]);
                rest = &code[end + 1..];
                if rest.starts_with('(')
                    && let Some(close) = rest.find(')')
                {
                    rest = &rest[close + 1..];
                }
            }
            _ => {
                out.push('[');
                rest = code;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A scenario file: one scenario, or (JSON only) an array of them.
struct ScenarioFile;

impl JsonSchema for ScenarioFile {
    fn schema_name() -> Cow<'static, str> {
        "ScenarioFile".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let one = generator.subschema_for::<Scenario>();
        json_schema!({
            "anyOf": [one, { "type": "array", "items": one }]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_read_as_plain_text() {
        assert_eq!(
            plain("Like [`Mode::None`], but the section\nis abandoned.\n\nSecond ([`x`](mod@y))."),
            "Like `Mode::None`, but the section is abandoned.\n\nSecond (`x`)."
        );
        // Brackets that are not links stay.
        assert_eq!(
            plain("`[100, 800]` or [a] or [`a` b]"),
            "`[100, 800]` or [a] or [`a` b]"
        );
    }

    #[test]
    fn every_document_is_a_draft_2020_12_schema_with_a_title() {
        for doc in Document::ALL {
            let schema = doc.schema();
            assert_eq!(
                schema.get("$schema").and_then(Value::as_str),
                Some("https://json-schema.org/draft/2020-12/schema"),
                "{doc:?}"
            );
            assert!(schema.get("title").is_some(), "{doc:?}");
            assert!(doc.to_json().ends_with("}\n"), "{doc:?}");
        }
    }
}
