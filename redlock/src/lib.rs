//! Redlock with fencing tokens (work in progress).
