//! Configuration checks shared by the subcommands, run before anything starts: each
//! returns a [`CommandError::Usage`] that names the flag and what to write instead.

use std::path::Path;
use std::time::Duration;

use super::CommandError;

/// At least 1: `--workers`, `--nodes`, `--runs`, ...
///
/// # Errors
/// A usage error naming `flag`.
pub fn at_least_one<T: PartialOrd + From<u8> + std::fmt::Display>(
    flag: &str,
    value: T,
) -> Result<(), CommandError> {
    if value < T::from(1) {
        return Err(CommandError::usage(format!(
            "{flag} {value}: use at least 1"
        )));
    }
    Ok(())
}

/// A duration above zero.
///
/// # Errors
/// A usage error naming `flag`.
pub fn positive(flag: &str, value: Duration, example: &str) -> Result<(), CommandError> {
    if value.is_zero() {
        return Err(CommandError::usage(format!(
            "{flag} 0s: use a length above zero, e.g. {flag} {example}"
        )));
    }
    Ok(())
}

/// A probability: from 0 (never) to 1 (always).
///
/// # Errors
/// A usage error naming `flag`.
pub fn probability(flag: &str, value: f64) -> Result<(), CommandError> {
    if !(0.0..=1.0).contains(&value) {
        return Err(CommandError::usage(format!(
            "{flag} {value}: not a probability; use values from 0 (never) to 1 (always), e.g. 0.01"
        )));
    }
    Ok(())
}

/// A PostgreSQL DSN (`host=... user=...`) or URL (`postgresql://user@host/db`) that parses;
/// whether the server answers is the harness's business.
///
/// # Errors
/// A usage error naming `--pg-url` and `PG_DSN`.
pub fn pg_url(url: &str) -> Result<(), CommandError> {
    url.parse::<tokio_postgres::Config>()
        .map(drop)
        .map_err(|e| {
            CommandError::usage(format!(
                "--pg-url / PG_DSN {url:?}: {e}; write a URL (postgresql://user@host:5432/db) or a DSN (host=127.0.0.1 user=postgres), or leave it out for a private server"
            ))
        })
}

/// The lock's settings for `nodes` at `ttl`: URLs that parse, no server twice, a TTL the
/// library accepts. Builds a client (no connection is made) and drops it.
///
/// # Errors
/// A usage error with the library's message, prefixed by `what`.
pub fn lock_settings(
    what: &str,
    nodes: &[String],
    ttl: Duration,
    node_timeout: Option<Duration>,
) -> Result<(), CommandError> {
    let mut builder = fenced_redlock::Redlock::builder(nodes).ttl(ttl);
    if let Some(t) = node_timeout {
        builder = builder.node_timeout(t);
    }
    builder
        .build()
        .map(drop)
        .map_err(|e| CommandError::usage(format!("{what}: {e}")))
}

/// A directory the command will write files into (`--report DIR`): it exists and takes a
/// file, or it can be created. A directory this check creates is removed again, so a
/// refused command leaves nothing behind.
///
/// # Errors
/// A usage error naming `flag` and the cause.
pub fn writable_dir(flag: &str, dir: &Path) -> Result<(), CommandError> {
    let refuse = |e: std::io::Error| {
        CommandError::usage(format!(
            "{flag} {}: cannot write there ({e}); name a directory you can write to",
            dir.display()
        ))
    };
    // The first missing ancestor is what creating `dir` adds, and what is removed after.
    let created = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .last()
        .map(Path::to_path_buf);
    std::fs::create_dir_all(dir).map_err(refuse)?;
    let probe = dir.join(format!(".chaos-write-check-{}", std::process::id()));
    let written = std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe));
    if let Some(top) = &created {
        // Only what this check made, and only now; the command creates it again.
        let _ = std::fs::remove_dir_all(top);
    }
    written.map_err(refuse)
}

/// A file the command will write (`--json-out FILE`, `--state FILE`): its directory exists
/// and it can be created or replaced there. A file this check creates is removed again.
///
/// # Errors
/// A usage error naming `flag` and the cause.
pub fn writable_file(flag: &str, path: &Path) -> Result<(), CommandError> {
    let refuse = |e: String| {
        CommandError::usage(format!(
            "{flag} {}: cannot write it ({e}); name a file in a directory you can write to",
            path.display()
        ))
    };
    if path.is_dir() {
        return Err(refuse("it is a directory".into()));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| refuse(e.to_string()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_flag() {
        assert!(at_least_one("--runs", 1u32).is_ok());
        let e = at_least_one("--runs", 0u32).expect_err("0 runs");
        assert!(e.to_string().contains("--runs 0"), "{e}");
        assert!(probability("--rates", 0.0).is_ok() && probability("--rates", 1.0).is_ok());
        for bad in [2.0, -0.1, f64::NAN] {
            let e = probability("--rates", bad).expect_err("not a probability");
            assert!(e.to_string().contains("from 0"), "{e}");
        }
        assert!(positive("--ttl", Duration::ZERO, "200ms").is_err());
    }

    #[test]
    fn pg_urls_in_both_forms() {
        assert!(pg_url("postgresql://postgres@127.0.0.1:5432/postgres").is_ok());
        assert!(pg_url("host=127.0.0.1 user=postgres").is_ok());
        assert!(pg_url("postgresql://host:notaport/db").is_err());
    }

    #[test]
    fn directories_are_probed_and_left_as_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fresh = tmp.path().join("a/b/c");
        writable_dir("--report", &fresh).expect("creatable");
        assert!(!tmp.path().join("a").exists(), "the check left a directory");
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").expect("write");
        let e = writable_dir("--report", &file.join("sub")).expect_err("under a file");
        assert!(e.to_string().contains("--report"), "{e}");
        let e = writable_file("--json-out", tmp.path()).expect_err("a directory");
        assert!(e.to_string().contains("directory"), "{e}");
        let out = tmp.path().join("out.json");
        writable_file("--json-out", &out).expect("creatable");
        assert!(!out.exists(), "the check left a file");
        writable_file("--json-out", &file).expect("replaceable");
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "x");
        assert!(writable_file("--json-out", &file.join("x")).is_err());
    }
}
