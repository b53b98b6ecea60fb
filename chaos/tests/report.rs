//! Renderer tests on a synthetic run: `write_all` → report.html (parsed as HTML5, SVG checked
//! as XML), junit.xml (parsed as XML), `load`, and `chaos report DIR`.

use crate::report_fixture;

use std::process::Command;

use quick_xml::Reader;
use quick_xml::events::Event;
use redlock_chaos::report::{self, Outcome};
use report_fixture::{EVIL_NAME, MODES, WORKERS};
use scraper::{Html, Selector};

fn sel(s: &str) -> Selector {
    Selector::parse(s).expect("selector")
}

/// Every `<svg …>…</svg>` fragment of the page.
fn svg_fragments(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg ") {
        let end = rest[start..].find("</svg>").expect("svg closed") + start + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

/// Well-formed XML (balanced, matching end tags, valid entities); returns element names.
fn xml_elements(xml: &str) -> Vec<String> {
    let mut r = Reader::from_str(xml);
    let mut names = Vec::new();
    loop {
        match r.read_event() {
            Ok(Event::Eof) => break,
            Ok(Event::Start(e) | Event::Empty(e)) => {
                names.push(String::from_utf8_lossy(e.name().as_ref()).into_owned())
            }
            Ok(Event::Text(t)) => {
                t.decode().expect("text decodes");
            }
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", r.buffer_position()),
        }
    }
    names
}

#[test]
fn html_has_a_timeline_per_scenario_with_every_lane_and_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = report_fixture::report(2, 3000);
    let paths = report::write_all(dir.path(), &run).expect("write_all");
    let html = std::fs::read_to_string(&paths.html).expect("read html");

    // Self-contained: no script, no external reference of any kind.
    let lower = html.to_ascii_lowercase();
    for bad in ["<script", "src=", "http://", "https://", "@import", "url("] {
        assert!(!lower.contains(bad), "report.html contains {bad:?}");
    }
    // The hostile scenario name is text, not markup.
    assert!(html.contains("stall&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));

    let doc = Html::parse_document(&html);
    let names: Vec<String> = doc
        .select(&sel("section.scenario h2"))
        .map(|h| h.text().collect())
        .collect();
    assert_eq!(
        names,
        vec!["pause-minority-0".to_string(), EVIL_NAME.to_string()]
    );
    assert_eq!(doc.select(&sel("section.scenario.fail")).count(), 1);
    assert_eq!(doc.select(&sel("section.scenario.pass")).count(), 1);
    let timelines: Vec<_> = doc.select(&sel("svg.timeline")).collect();
    assert_eq!(timelines.len(), 2);
    assert_eq!(doc.select(&sel("svg.latency")).count(), 2);
    assert_eq!(doc.select(&sel("svg.counter")).count(), 2);
    assert_eq!(doc.select(&sel("table.summary:not(.lost)")).count(), 2);
    assert_eq!(
        doc.select(&sel("table.summary:not(.lost) tbody tr"))
            .count(),
        6
    );
    // The fixture's one named lost update, with the stale write that erased it.
    let lost: Vec<String> = doc
        .select(&sel("table.lost tbody tr"))
        .map(|r| r.text().collect::<Vec<_>>().join("|"))
        .collect();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(
        lost[0].contains("w1#41")
            && lost[0].contains("w2#40")
            && lost[0].contains("after its lease"),
        "{lost:?}"
    );
    assert!(doc.select(&sel(".legend")).count() >= 6);

    for (tl, s) in timelines.iter().zip(&run.scenarios) {
        for m in MODES {
            for w in 0..WORKERS {
                let lane = sel(&format!("g.lane[data-mode=\"{m}\"][data-worker=\"{w}\"]"));
                assert_eq!(tl.select(&lane).count(), 1, "{}: lane {m}/w{w}", s.name);
            }
            // Refused writes: every one drawn, none thinned away.
            let drawn: usize = tl
                .select(&sel(&format!("g.lane[data-mode=\"{m}\"] path.rejected")))
                .map(|p| {
                    p.value()
                        .attr("data-count")
                        .and_then(|c| c.parse::<usize>().ok())
                        .unwrap_or(0)
                })
                .sum();
            assert_eq!(
                drawn,
                s.timeline[m].rejected.len(),
                "{}: refused writes in {m}",
                s.name
            );
            let violations = tl
                .select(&sel(&format!("g.mode[data-mode=\"{m}\"] path.violation")))
                .count();
            assert_eq!(
                violations,
                s.timeline[m].violations.len(),
                "{}: violations in {m}",
                s.name
            );
        }
        let targets: Vec<&str> = tl
            .select(&sel("g.fault-lane"))
            .filter_map(|g| g.value().attr("data-target"))
            .collect();
        let mut expected: Vec<&str> = s
            .faults
            .iter()
            .flat_map(|f| f.targets.iter().map(String::as_str))
            .collect();
        expected.sort();
        expected.dedup();
        assert_eq!(targets, expected, "one fault lane per target, in order");
    }
    let total_rejected: usize = run
        .scenarios
        .iter()
        .flat_map(|s| s.timeline.values())
        .map(|t| t.rejected.len())
        .sum();
    assert!(total_rejected > 0, "the fixture has refused writes");
    assert_eq!(doc.select(&sel("path.violation")).count(), 2);
    assert_eq!(doc.select(&sel("rect.fault.unhealed")).count(), 1);
    assert!(
        doc.select(&sel("td.bad")).count() >= 2,
        "lost and violations highlighted"
    );

    // Every SVG is well-formed XML too (an HTML parser forgives what a viewer may not).
    let frags = svg_fragments(&html);
    assert_eq!(frags.len(), 6);
    for f in frags {
        let els = xml_elements(f);
        assert_eq!(els[0], "svg");
    }
}

#[test]
fn a_big_run_stays_small() {
    // Ten scenarios of 20 000 grants per mode: thinned to pixels, still every marker.
    let run = report_fixture::report(10, 20_000);
    let html = report::render_html(&run);
    assert!(
        html.len() < 5 * 1024 * 1024,
        "report.html is {} bytes",
        html.len()
    );
    let doc = Html::parse_document(&html);
    assert_eq!(doc.select(&sel("svg.timeline")).count(), 10);
    assert_eq!(doc.select(&sel("path.violation")).count(), 2);
}

fn junit_counts(xml: &str) -> (usize, usize, usize, Vec<String>) {
    let mut r = Reader::from_str(xml);
    let (mut cases, mut failures, mut errors, mut names) = (0, 0, 0, Vec::new());
    loop {
        match r.read_event().expect("junit.xml is well-formed") {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                b"testcase" => {
                    cases += 1;
                    let name = e.try_get_attribute("name").expect("attr").expect("name");
                    names.push(
                        name.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .expect("unescape")
                            .into_owned(),
                    );
                }
                b"failure" => failures += 1,
                b"error" => errors += 1,
                _ => {}
            },
            _ => {}
        }
    }
    (cases, failures, errors, names)
}

#[test]
fn junit_has_a_case_per_scenario_and_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = report_fixture::report(2, 500);
    let paths = report::write_all(dir.path(), &run).expect("write_all");
    let xml = std::fs::read_to_string(&paths.junit).expect("read junit");
    let (cases, failures, errors, names) = junit_counts(&xml);
    assert_eq!(cases, 6);
    // Only the mode whose own check failed (`none`) fails; claim_first and write_only met
    // theirs.
    assert_eq!(failures, 1, "{xml}");
    assert_eq!(errors, 0);
    assert!(names.contains(&format!("{EVIL_NAME}/none")), "{names:?}");
    assert!(names.contains(&"pause-minority-0/claim_first".to_string()));
    assert!(xml.contains("7 increments lost"));
    // The fixture's reasons do not say their kind (as before they did): the old type.
    assert!(xml.contains("type=\"expectation\""), "{xml}");

    // A harness failure is an error in every mode.
    let mut broken = run.clone();
    broken.scenarios[0].verdict.outcome = Outcome::Unknown;
    broken.scenarios[0].verdict.reasons = vec!["postgres did not start".into()];
    let (cases, failures, errors, _) = junit_counts(&report::render_junit(&broken).expect("junit"));
    assert_eq!((cases, failures, errors), (6, 1, 3));
}

/// A lock that stayed safe but stopped granting is told apart from an unsafe one wherever
/// a run is rendered: JUnit's failure type (still a failure, never green), the HTML card
/// and badge, the table, the Markdown summary, and `chaos report --exit-code` (4, and 1
/// once a safety check failed anywhere in the run).
#[test]
fn an_unavailable_run_is_told_apart_from_a_failed_one_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run = report_fixture::report(2, 300);
    let s = &mut run.scenarios[1];
    s.verdict.outcome = Outcome::Unavailable;
    s.verdict.reasons = vec![
        "ok: none: 0 exclusion violations, the longest 0 µs (want 0)".into(),
        "FAILED (liveness): none: 1 minority faults of 2 s or more without a completed section (want 0: a minority fault must not stop the lock)".into(),
        "reported: none: lost 0".into(),
    ];
    s.verdict.failed_modes = vec!["none".into()];
    run.verdict = Outcome::Unavailable;
    let paths = report::write_all(dir.path(), &run).expect("write_all");

    let xml = std::fs::read_to_string(&paths.junit).expect("read junit");
    assert_eq!(junit_counts(&xml).1, 1, "{xml}");
    assert!(xml.contains("type=\"liveness\""), "{xml}");
    assert!(!xml.contains("type=\"safety\""), "{xml}");
    assert!(xml.contains("1 minority faults of 2 s"), "{xml}");

    let doc = Html::parse_document(&std::fs::read_to_string(&paths.html).expect("html"));
    assert_eq!(doc.select(&sel("section.scenario.unavailable")).count(), 1);
    assert_eq!(doc.select(&sel("section.scenario.fail")).count(), 0);
    let badge = doc
        .select(&sel("section.run span.badge"))
        .next()
        .expect("the run's badge");
    assert_eq!(badge.text().collect::<String>(), "unavailable");
    assert_eq!(
        badge.value().attr("title"),
        Some("every safety check met; a liveness check failed")
    );

    let table = redlock_chaos::run::table::render(&run);
    assert!(table.contains("UNAVAILABLE (liveness)"), "{table}");
    assert!(
        table.contains(
            "overall: Unavailable (exit 4: every safety check met; a liveness check failed)"
        ),
        "{table}"
    );
    let md = report::render_markdown(&run);
    assert!(
        md.contains("**UNAVAILABLE** (liveness failed, safety held) | FAILED (liveness): none: 1 minority faults"),
        "{md}"
    );

    let exit_code = || {
        Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args(["report", "--exit-code"])
            .arg(dir.path())
            .output()
            .expect("run chaos report --exit-code")
            .status
            .code()
    };
    assert_eq!(exit_code(), Some(4));

    // A safety failure in another scenario outranks it: the run fails, exit 1, and each
    // failed case keeps its own kind.
    let s = &mut run.scenarios[0];
    s.verdict.outcome = Outcome::Fail;
    s.verdict.reasons = vec!["FAILED (safety): write_only: 2 exclusion violations (want 0)".into()];
    s.verdict.failed_modes = vec!["write_only".into()];
    run.verdict = run.verdict.worst(Outcome::Fail);
    assert_eq!(run.verdict, Outcome::Fail);
    let paths = report::write_all(dir.path(), &run).expect("write_all");
    let xml = std::fs::read_to_string(&paths.junit).expect("read junit");
    assert_eq!(junit_counts(&xml).1, 2, "{xml}");
    assert!(xml.contains("type=\"liveness\""), "{xml}");
    assert!(xml.contains("type=\"safety\""), "{xml}");
    assert!(
        redlock_chaos::run::table::render(&run)
            .contains("overall: Fail (exit 1: a safety check failed)")
    );
    assert_eq!(exit_code(), Some(1));
}

#[test]
fn load_round_trips_and_chaos_report_rerenders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = report_fixture::report(2, 300);
    let paths = report::write_all(dir.path(), &run).expect("write_all");
    assert_eq!(report::load(dir.path()).expect("load"), run);
    std::fs::remove_file(&paths.html).expect("rm html");
    std::fs::remove_file(&paths.junit).expect("rm junit");

    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .arg("report")
        .arg(dir.path())
        .output()
        .expect("run chaos report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&paths.html).expect("html re-rendered");
    assert_eq!(html, report::render_html(&run));
    assert!(paths.junit.exists());

    // --exit-code hands the verdict to CI: this run has a failing scenario.
    let st = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["report", "--exit-code"])
        .arg(dir.path())
        .output()
        .expect("run chaos report --exit-code");
    assert_eq!(st.status.code(), Some(1));

    // A missing directory is a setting to change: exit 64.
    let st = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["report", "/nonexistent/chaos-report"])
        .output()
        .expect("run chaos report");
    assert_eq!(st.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&st.stderr).contains("report.json"));
}

/// What failed comes before the charts; the checks that passed fold away (a real scenario
/// has 20 or more), and the wide summary table scrolls inside its card.
#[test]
fn met_checks_fold_away_and_the_table_scrolls_in_its_card() {
    let mut run = report_fixture::report(1, 300);
    run.scenarios[0].verdict.reasons = vec![
        "ok: none: 0 exclusion violations (want 0)".into(),
        "FAILED: checked: 2 exclusion violations (want 0)".into(),
        "ok: checked: lost 0 (want 0)".into(),
        "reported: none: lost 0".into(),
    ];
    let doc = Html::parse_document(&report::render_html(&run));
    let card = doc
        .select(&sel("section.scenario"))
        .next()
        .expect("a scenario card");
    let shown: Vec<String> = card
        .select(&sel("section.scenario > ul.reasons > li"))
        .map(|li| li.text().collect())
        .collect();
    assert_eq!(
        shown,
        [
            "FAILED: checked: 2 exclusion violations (want 0)",
            "reported: none: lost 0"
        ]
    );
    let folded: Vec<String> = card
        .select(&sel("details.met li"))
        .map(|li| li.text().collect())
        .collect();
    assert_eq!(
        folded,
        [
            "ok: none: 0 exclusion violations (want 0)",
            "ok: checked: lost 0 (want 0)"
        ]
    );
    let summary: String = card
        .select(&sel("details.met > summary"))
        .flat_map(|s| s.text())
        .collect();
    assert_eq!(summary, "2 checks met");
    assert_eq!(card.select(&sel("div.table > table.summary")).count(), 1);
}
