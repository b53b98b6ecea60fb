//! Output for people and pipes: `chaos scenarios | head` must end quietly when `head` has
//! read enough, not panic with "failed printing to stdout" as `println!` does.
//!
//! A reader that went away ends the output; the rest is dropped and the command goes on to
//! its own exit code (a `chaos run --json | head` still exits 1 on a failed expectation).

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout's reader is gone: everything after is dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a newline to stdout. A closed pipe drops this and every later line;
/// any other error is reported once on stderr and dropped likewise.
pub fn line(args: fmt::Arguments<'_>) {
    write(args, "\n");
}

/// Writes `args` to stdout, without a newline (see [`line()`]).
pub fn text(args: fmt::Arguments<'_>) {
    write(args, "");
}

fn write(args: fmt::Arguments<'_>, end: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let r = out
        .write_fmt(args)
        .and_then(|()| out.write_all(end.as_bytes()))
        .and_then(|()| out.flush());
    if let Err(e) = r {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("chaos: writing to stdout: {e}; the rest of the output is dropped");
        }
    }
}

/// `println!` through [`line()`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::commands::stdout::line(format_args!($($arg)*))
    };
}

/// `print!` through [`text()`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::commands::stdout::text(format_args!($($arg)*))
    };
}
