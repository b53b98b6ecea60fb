//! The lock-mutant catalogue (`mutants/redlock.toml`) still applies to the source: every
//! entry's `find` text occurs exactly once in its file under `redlock/src`, and names are
//! unique; a library test an entry names exists. `scripts/lock-mutants` refuses to judge a drifted entry, but it runs only when
//! someone runs it; two entries had drifted unnoticed (2026-12-04) when a change to the
//! code they patch did not touch the catalogue.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Deserialize)]
struct Catalogue {
    mutant: Vec<Mutant>,
}

#[derive(Deserialize)]
struct Mutant {
    name: String,
    file: String,
    find: String,
    replace: String,
    bug: String,
    expect: String,
    /// `TARGET::NAME`: a test in `redlock/tests/TARGET.rs` that the mutant must fail.
    #[serde(default)]
    test: Option<String>,
}

#[test]
fn every_mutant_patches_exactly_one_place_of_todays_source() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("mutants/redlock.toml")).expect("catalogue");
    let catalogue: Catalogue = toml::from_str(&text).expect("catalogue parses");
    assert!(!catalogue.mutant.is_empty());
    let mut names = HashSet::new();
    let mut drifted = Vec::new();
    for m in &catalogue.mutant {
        assert!(names.insert(m.name.clone()), "two mutants named {}", m.name);
        assert!(
            !m.bug.is_empty() && !m.expect.is_empty(),
            "{}: say what it models and what should catch it",
            m.name
        );
        assert_ne!(
            m.find, m.replace,
            "{}: a mutation that changes nothing",
            m.name
        );
        let path = root.join("redlock/src").join(&m.file);
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {}: {e}", m.name, path.display()));
        if let Some(test) = &m.test {
            let (target, name) = test
                .split_once("::")
                .unwrap_or_else(|| panic!("{}: test {test:?} is not TARGET::NAME", m.name));
            let path = root.join("redlock/tests").join(format!("{target}.rs"));
            let tests = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", m.name, path.display()));
            assert!(
                tests.contains(&format!("async fn {name}("))
                    || tests.contains(&format!("fn {name}(")),
                "{}: no test {name} in {}",
                m.name,
                path.display()
            );
        }
        let found = source.matches(m.find.as_str()).count();
        if found != 1 {
            drifted.push(format!("{} ({}): found {found} times", m.name, m.file));
        }
    }
    assert!(
        drifted.is_empty(),
        "mutants whose `find` no longer matches exactly once (fix the entry in \
         mutants/redlock.toml): {drifted:?}"
    );
}
