//! Helpers shared by the cluster integration tests: one short-lived client connection per
//! command, always under a timeout, so a dead or frozen node shows up as an error.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

pub const T: Duration = Duration::from_secs(2);

/// Run one command on a fresh connection; `Err` on connect/command failure or timeout.
pub async fn cmd(url: &str, args: &[&str], timeout: Duration) -> Result<redis::Value, String> {
    let fut = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query_async::<redis::Value>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out after {timeout:?}")),
    }
}

pub async fn ping(url: &str, timeout: Duration) -> Result<(), String> {
    match cmd(url, &["PING"], timeout).await? {
        redis::Value::SimpleString(s) if s == "PONG" => Ok(()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

pub async fn set_ex(url: &str, key: &str, value: &str, secs: u64) {
    let secs = secs.to_string();
    cmd(url, &["SET", key, value, "EX", &secs], T)
        .await
        .expect("SET");
}

pub async fn get(url: &str, key: &str) -> Option<String> {
    match cmd(url, &["GET", key], T).await.expect("GET") {
        redis::Value::Nil => None,
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        other => panic!("unexpected GET reply {other:?}"),
    }
}

/// Whether the process `pid` still exists (zombies count as gone: they hold no resources).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}
