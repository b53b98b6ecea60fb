//! report.html in a real browser: headless Chromium loads the page and its dumped DOM holds
//! the timeline SVGs; a screenshot is saved for people to look at.
//!
//! Fails when `CI=true` and no Chromium is installed (scripts/install-deps installs it);
//! skips with a message otherwise.

use crate::report_fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redlock_chaos::report;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs the browser with a deadline: a hung headless Chromium must not hang the suite.
/// Output goes to files, not pipes: a dumped DOM is bigger than a pipe buffer, and an
/// unread pipe would block the browser forever.
fn browse(browser: &Path, work: &Path, args: &[String]) -> (bool, String, String) {
    use std::os::unix::process::CommandExt;
    let (out_path, err_path) = (work.join("stdout"), work.join("stderr"));
    let file = |p: &Path| std::fs::File::create(p).expect("create output file");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .args(args)
        .stdin(Stdio::null())
        .stdout(file(&out_path))
        .stderr(file(&err_path))
        // Its own process group, so a timeout can end the browser's children too.
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait chromium") {
            break st;
        }
        if Instant::now() > deadline {
            let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            panic!(
                "chromium hung: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    (status.success(), read(&out_path), read(&err_path))
}

#[test]
fn chromium_loads_the_report_and_draws_the_timelines() {
    let Some(browser) = chromium() else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true but no chromium on PATH: run scripts/install-deps");
        }
        eprintln!("SKIP: no chromium on PATH (scripts/install-deps installs it)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = report_fixture::report(2, 3000);
    let paths = report::write_all(dir.path(), &fixture).expect("write_all");
    let url = format!("file://{}", paths.html.display());

    let (ok, dom, err) = browse(&browser, dir.path(), &["--dump-dom".into(), url.clone()]);
    assert!(ok, "chromium failed: {err}");
    assert_eq!(
        dom.matches("<svg class=\"timeline\"").count(),
        2,
        "dumped DOM:\n{:.2000}",
        dom
    );
    assert_eq!(
        dom.matches("class=\"lane\"").count(),
        2 * 3 * report_fixture::WORKERS
    );
    assert!(dom.contains("class=\"violation\""));
    // The hostile scenario name is still text after the browser parsed it.
    assert!(!dom.contains("<script>alert"));

    // A screenshot for people (and for docs/report-screenshot.png).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let (ok, _, err) = browse(
        &browser,
        dir.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,800".into(),
            url,
        ],
    );
    assert!(ok, "chromium failed: {err}");
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot is {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}

/// Renders the failing fixture scenario alone to `target/tmp/docs/` with a screenshot, for
/// `docs/report-screenshot.png`: `cargo nextest run -p redlock-chaos --test integration -E 'test(/^report_browser::/)' --run-ignored only`.
#[test]
#[ignore = "writes the docs screenshot; run by hand"]
fn docs_screenshot() {
    let Some(browser) = chromium() else {
        eprintln!("SKIP: no chromium on PATH");
        return;
    };
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs");
    let mut run = report_fixture::report(2, 3000);
    run.scenarios.remove(0);
    run.scenarios[0].name = "clock-jump".into();
    let paths = report::write_all(&out, &run).expect("write_all");
    let url = format!("file://{}", paths.html.display());
    let height = std::env::var("SHOT_HEIGHT").unwrap_or_else(|_| "800".into());
    let shot = out.join("report-screenshot.png");
    let work = tempfile::tempdir().expect("tempdir");
    let (ok, _, err) = browse(
        &browser,
        work.path(),
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size=1200,{height}"),
            url,
        ],
    );
    assert!(ok, "chromium failed: {err}");
    eprintln!("screenshot: {}", shot.display());
}
