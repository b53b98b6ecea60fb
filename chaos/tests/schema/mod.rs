//! Checks a JSON value against one of the schemas in `docs/schema/`.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;

/// Panics with every violation (and where) unless `value` matches `docs/schema/NAME`.
pub fn check(value: &serde_json::Value, name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schema")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("{name} is not a valid draft 2020-12 schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

/// Panics unless `value` does NOT match `docs/schema/NAME` (the schema is not vacuous).
pub fn refuses(value: &serde_json::Value, name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schema")
        .join(name);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("schema")).expect("json");
    let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
    assert!(!validator.is_valid(value), "{name} accepted {value}");
}
