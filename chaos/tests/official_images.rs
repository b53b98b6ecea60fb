//! The docker backend on official images, tested with no registry: `chaos images` builds the
//! offline stand-ins, which take the official images' command lines and environment; they
//! are tagged under the official repositories with a tag of this test's own
//! (`valkey/valkey:redlock-chaos-e2e-<pid>`, ... : no real image has it), and
//! `chaos run --backend docker --images official` given those names passes two short
//! scenarios (a wipe-restart and a proxy partition), its report names those images by id,
//! and nothing labelled with its run is left; then `--images auto` picks them too (present,
//! so nothing is pulled). Nothing is ever pulled: every image exists before a run asks.
//!
//! The tags are removed on every exit path (a guard's Drop, also while unwinding), and only
//! while each still names the image this test tagged.
//!
//! Not tested here: the real official images (no registry), pulls, arm64, Docker Desktop.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use bollard::Docker;
use bollard::query_parameters::{RemoveImageOptionsBuilder, TagImageOptionsBuilder};
use redlock_chaos::cluster::official::image_id;
use redlock_chaos::cluster::{docker, official};
use redlock_chaos::commands::images::{POSTGRES_TAG, TOXIPROXY_TAG, VALKEY_TAG};

/// The `chaos` binary: `CHAOS_BIN` (scripts/test sets the optimized one) or this package's.
fn chaos_bin() -> PathBuf {
    std::env::var_os("CHAOS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chaos")))
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `repo:tag` split at the last colon after the last slash.
fn split(name: &str) -> (&str, &str) {
    match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => (&name[..i], &name[i + 1..]),
        _ => (name, "latest"),
    }
}

/// Official-looking names this test made, each with the id it was given; removed on drop
/// while they still name that id.
struct Tags {
    made: Vec<(String, String)>,
}

impl Tags {
    /// Tags `source` as `target`, which must not exist yet.
    async fn tag(&mut self, d: &Docker, source: &str, target: &str) -> String {
        assert_eq!(
            image_id(d, target).await.expect("inspect"),
            None,
            "{target} exists already; this test only makes names of its own"
        );
        let id = image_id(d, source)
            .await
            .expect("inspect")
            .unwrap_or_else(|| panic!("{source} missing after `chaos images`"));
        let (repo, tag) = split(target);
        d.tag_image(
            source,
            Some(
                TagImageOptionsBuilder::default()
                    .repo(repo)
                    .tag(tag)
                    .build(),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("tagging {source} as {target}: {e}"));
        self.made.push((target.to_owned(), id.clone()));
        id
    }
}

impl Drop for Tags {
    fn drop(&mut self) {
        let made = std::mem::take(&mut self.made);
        // Drop cannot await and runs inside the test's runtime: a thread with its own.
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let d = docker::connect().await.expect("docker");
                for (name, id) in made {
                    // Untag only (no force, no prune): the image stays under its own tag.
                    if image_id(&d, &name).await.ok().flatten().as_deref() == Some(&id) {
                        let opts = RemoveImageOptionsBuilder::default().noprune(true).build();
                        if let Err(e) = d.remove_image(&name, Some(opts), None).await {
                            eprintln!("could not remove the tag {name}: {e}");
                        }
                    }
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// `chaos run --backend docker --images <source>` with the test's names; returns its
/// report.json.
fn run(source: &str, names: &[String; 3], scenarios: &str, run_id: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let out = Command::new(chaos_bin())
        .args(["run", "--backend", "docker", "--images", source])
        .args(["--server-image", &names[0]])
        .args(["--toxiproxy-image", &names[1]])
        .args(["--postgres-image", &names[2]])
        .args(["--scenario", scenarios, "--duration", "10s", "--seed", "7"])
        .args(["--run-id", run_id])
        .arg("--report")
        .arg(dir.path())
        .env("CHAOS_BIN", chaos_bin())
        .output()
        .expect("run chaos run");
    println!(
        "chaos run --images {source} ({:.1}s):\n{}",
        started.elapsed().as_secs_f64(),
        text(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json = std::fs::read_to_string(dir.path().join("report.json")).expect("report.json");
    serde_json::from_str(&json).expect("report.json parses")
}

/// The report ran exactly `names` (server, proxy, postgres), by `ids`, as official images,
/// and left nothing labelled with `run_id`.
async fn assert_ran(
    d: &Docker,
    report: &serde_json::Value,
    names: &[String; 3],
    ids: &[String; 3],
    run_id: &str,
) {
    assert_eq!(report["verdict"], "pass", "{report:#}");
    assert_eq!(report["backend"], "docker");
    let version = report["server_version"].as_str().expect("server_version");
    assert!(version.starts_with("valkey "), "{version}");
    let images = report["images"].as_array().expect("images");
    for (role, (name, id)) in ["server", "proxy", "postgres"]
        .iter()
        .zip(names.iter().zip(ids))
    {
        let used = images
            .iter()
            .find(|i| i["role"] == *role)
            .unwrap_or_else(|| panic!("no {role} image in {images:?}"));
        assert_eq!(used["name"], name.as_str(), "{used}");
        assert_eq!(used["id"], id.as_str(), "{used}");
        assert_eq!(used["source"], "official", "{used}");
    }
    let left = docker::list_labelled(d, Some(run_id))
        .await
        .expect("list labelled");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_official_images_passes_with_retagged_offline_ones() {
    if !docker::engine_available().await {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "no Docker engine answers and CI=true: the official-image path cannot be tested"
        );
        println!("SKIPPED official_images: no Docker engine answers");
        return;
    }
    let d = docker::connect().await.expect("docker");
    let started = Instant::now();
    let images = Command::new(chaos_bin())
        .arg("images")
        .output()
        .expect("run chaos images");
    assert!(images.status.success(), "chaos images: {}", text(&images));
    println!("chaos images ({:?}):\n{}", started.elapsed(), text(&images));

    let pid = std::process::id();
    let tag = format!("redlock-chaos-e2e-{pid}");
    let names = [
        official::DEFAULT_VALKEY_IMAGE,
        official::DEFAULT_TOXIPROXY_IMAGE,
        official::DEFAULT_POSTGRES_IMAGE,
    ]
    .map(|official| format!("{}:{tag}", split(official).0));
    let mut tags = Tags { made: Vec::new() };
    let mut ids = Vec::new();
    for (source, target) in [VALKEY_TAG, TOXIPROXY_TAG, POSTGRES_TAG].iter().zip(&names) {
        ids.push(tags.tag(&d, source, target).await);
    }
    let ids: [String; 3] = ids.try_into().expect("three ids");

    let run_id = format!("official-e2e-{pid}");
    let report = run(
        "official",
        &names,
        "amnesia-restart,partition-minority",
        &run_id,
    );
    assert_ran(&d, &report, &names, &ids, &run_id).await;

    let run_id = format!("auto-e2e-{pid}");
    let report = run("auto", &names, "kill-minority", &run_id);
    assert_ran(&d, &report, &names, &ids, &run_id).await;

    drop(tags);
    for name in &names {
        assert_eq!(
            image_id(&d, name).await.expect("inspect"),
            None,
            "{name} left"
        );
    }
    // The offline images keep their own tags.
    for tag in [VALKEY_TAG, TOXIPROXY_TAG, POSTGRES_TAG] {
        assert!(image_id(&d, tag).await.expect("inspect").is_some(), "{tag}");
    }
}
