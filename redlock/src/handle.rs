//! Releasing or extending a lease from another process: a [`LeaseHandle`].
//!
//! A job that takes a lock in one process and finishes in another (a scheduler that hands
//! work to a worker, a request that is answered by a queue consumer) turns its
//! [`Lease`](crate::Lease) into a handle with [`Lease::into_handle`](crate::Lease::into_handle),
//! sends it (with the `serde` feature it is `Serialize` and `Deserialize`), and the other
//! process takes it over with [`Redlock::adopt`](crate::Redlock::adopt), which gives back a
//! `Lease` that can [`extend`](crate::Lease::extend) and [`release`](crate::Lease::release)
//! as if it had acquired it.
//!
//! ```no_run
//! # #[cfg(feature = "serde")]
//! # async fn demo(a: fenced_redlock::Redlock, b: fenced_redlock::Redlock) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use fenced_redlock::handle::LeaseHandle;
//!
//! // Process A
//! let lease = a.acquire("report:daily", Duration::from_secs(2)).await?;
//! let json = serde_json::to_string(&lease.into_handle())?;
//!
//! // Process B, given `json`
//! let handle: LeaseHandle = serde_json::from_str(&json)?;
//! let mut lease = b.adopt(handle)?;
//! assert_eq!(lease.remaining(), Duration::ZERO); // nothing known yet
//! lease.extend().await?; // now it is: the keys are ours on a majority
//! // ... finish the work ...
//! lease.release().await;
//! # Ok(()) }
//! ```
//!
//! ## Safety: validity does not travel
//! A lease's validity is a deadline on the monotonic clock of the process that measured
//! it; another process, let alone another machine, has no such deadline. The handle
//! carries the end of validity only as a **wall-clock hint**
//! ([`valid_until`](LeaseHandle::valid_until)): wall clocks differ between machines and
//! can jump, and the handle spent an unknown time in transit. So an adopted lease has no
//! known validity: [`remaining`](crate::Lease::remaining) is zero and
//! [`is_valid`](crate::Lease::is_valid) is false until an
//! [`extend`](crate::Lease::extend) (or [`extend_for`](crate::Lease::extend_for)) has
//! succeeded, which counts a fresh validity from this process's own clock. Do no protected
//! work before that. If the keys expired in the meantime the extend fails (another holder
//! may already have the lock) and the lease must be treated as lost.
//!
//! Do not renew with [`auto_renew`](crate::Lease::auto_renew) before the first extend: the
//! renewer would see no validity and report the lease lost at once.
//!
//! Release needs no validity: an adopted lease can always be released (a compare-and-delete
//! that touches only keys still holding its token), and dropping it releases in the
//! background as for any lease. One gap: the adopting process uses connections of its
//! own, so its release is not queued behind the original acquire's `SET`s the way the
//! acquiring process's would be. A `SET` still in flight to a node the acquire did not
//! wait for can land after the release; that node then keeps the key until its TTL (one
//! node of a minority: others can still take the lock on a majority).
//!
//! The fencing token travels unchanged: it is the same grant, and the resource orders
//! writes by it as before.
//!
//! ## A handle is a credential
//! The owner token in the handle is what lets its bearer extend and release the lock:
//! send handles only to processes you trust, and do not log them (`Debug` hides the token).
//! Use each handle once: two processes adopting the same handle would both believe they
//! hold the lock.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fence::FenceToken;

/// A lease in transit between processes, made by
/// [`Lease::into_handle`](crate::Lease::into_handle) and taken over by
/// [`Redlock::adopt`](crate::Redlock::adopt). With the `serde` feature it serializes as
///
/// ```json
/// {"resource":"report:daily","key":"report:daily","token":"9f86d0…(32 hex digits)",
///  "fence":7,"valid_until_unix_ms":1764590400123}
/// ```
///
/// `fence` is `null` without fencing. The token is written in lower case, as the servers
/// hold it; `adopt` reads it in either case (a system that treats hex as case-blind may
/// upper-case it in transit). See the [module docs](self) for what the adopting process
/// may assume (in short: nothing about validity until it extends).
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LeaseHandle {
    resource: String,
    key: String,
    token: String,
    fence: Option<u64>,
    valid_until_unix_ms: u64,
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseHandle")
            .field("resource", &self.resource)
            .field("key", &self.key)
            .field("token", &"***")
            .field("fence", &self.fence)
            .field("valid_until_unix_ms", &self.valid_until_unix_ms)
            .finish()
    }
}

impl LeaseHandle {
    /// A handle for a lease with `remaining` validity now, as measured by its holder.
    pub(crate) fn new(
        resource: String,
        key: String,
        token: String,
        fence: Option<FenceToken>,
        remaining: Duration,
    ) -> Self {
        let until = SystemTime::now()
            .checked_add(remaining)
            .unwrap_or_else(SystemTime::now);
        let valid_until_unix_ms = until
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        LeaseHandle {
            resource,
            key,
            token,
            fence: fence.map(FenceToken::get),
            valid_until_unix_ms,
        }
    }

    /// The resource name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The key on the nodes (the acquiring client's prefix + resource). An adopting client
    /// uses this key whatever its own prefix.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token of the grant, if the acquiring client had fencing on.
    pub fn fence(&self) -> Option<FenceToken> {
        self.fence.map(FenceToken::new)
    }

    /// When the holder that made the handle expected validity to end, on its wall clock.
    /// A hint for logs and for giving up early, never a promise: see the
    /// [module docs](self).
    pub fn valid_until(&self) -> SystemTime {
        UNIX_EPOCH
            .checked_add(Duration::from_millis(self.valid_until_unix_ms))
            .unwrap_or(UNIX_EPOCH)
    }

    pub(crate) fn into_parts(self) -> (String, String, String, Option<u64>) {
        (self.resource, self.key, self.token, self.fence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> LeaseHandle {
        LeaseHandle::new(
            "orders:1".into(),
            "p:orders:1".into(),
            "0123456789abcdef0123456789abcdef".into(),
            Some(FenceToken::new(7)),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn the_wall_clock_hint_is_now_plus_remaining() {
        let before = SystemTime::now();
        let h = handle();
        let until = h.valid_until();
        assert!(until >= before + Duration::from_secs(5) - Duration::from_millis(1));
        assert!(until <= SystemTime::now() + Duration::from_secs(5));
        assert_eq!(h.fence(), Some(FenceToken::new(7)));
        assert_eq!((h.resource(), h.key()), ("orders:1", "p:orders:1"));
        // An absurd remaining saturates instead of panicking.
        let far = LeaseHandle::new("r".into(), "r".into(), "t".into(), None, Duration::MAX);
        // (The hint is in whole milliseconds.)
        assert!(far.valid_until() >= before - Duration::from_millis(1));
    }

    #[test]
    fn debug_hides_the_token() {
        let text = format!("{:?}", handle());
        assert!(!text.contains("0123456789abcdef"), "{text}");
        assert!(text.contains("orders:1"), "{text}");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_round_trip_keeps_every_field() {
        let h = handle();
        let json = serde_json::to_value(&h).expect("serializes");
        assert_eq!(json["resource"], "orders:1");
        assert_eq!(json["key"], "p:orders:1");
        assert_eq!(json["token"], "0123456789abcdef0123456789abcdef");
        assert_eq!(json["fence"], 7);
        assert!(json["valid_until_unix_ms"].as_u64().is_some());
        let back: LeaseHandle = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, h);
    }
}
