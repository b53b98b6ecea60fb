//! The `toxiproxy-python` client from PyPI drives `chaos toxiproxy`: every
//! call it offers, with traffic through the proxies
//! (`toxiproxy_python/client_test.py`).
//!
//! `scripts/install-deps` puts the client in a venv at `target/py-toxiproxy`.
//! Without that venv the test is skipped with a message, unless `CI=true`,
//! where a missing venv is a failure.

use crate::toxiproxy_rig;

use std::path::PathBuf;
use std::process::Stdio;

use toxiproxy_rig::Rig;

fn venv_python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py-toxiproxy/bin/python")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_python_every_call() {
    let python = venv_python();
    if !python.exists() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!(
                "{} is missing and CI=true: run scripts/install-deps",
                python.display()
            );
        }
        println!(
            "SKIPPED toxiproxy_python_every_call: no {} (run scripts/install-deps)",
            python.display()
        );
        return;
    }
    let rig = Rig::new().await;
    let api = rig.server.addr();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/toxiproxy_python/client_test.py");
    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(api.ip().to_string())
        .arg(api.port().to_string())
        .arg(rig.echo.addr.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start python");
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("python script finished within 60 s")
        .expect("python ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "client_test.py failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("every call passed"), "{stdout}");
}
