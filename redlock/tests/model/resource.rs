//! The counter row and the statements of `fenced_redlock::pg`, each one atomic step (a
//! single `UPDATE`, which PostgreSQL serializes on the row).

use super::state::Resource;

impl Resource {
    /// `SELECT value`: unfenced, never refused.
    pub(crate) fn read(&self) -> u8 {
        self.value
    }

    /// `write_only`: `SET value = v, fence = t WHERE fence < t`.
    pub(crate) fn write_only(&mut self, fence: u8, value: u8) -> bool {
        if self.fence < fence {
            self.value = value;
            self.fence = fence;
            self.writes = self.writes.saturating_add(1);
            true
        } else {
            false
        }
    }

    /// `claim`: `SET fence = t WHERE fence < t RETURNING value`.
    pub(crate) fn claim(&mut self, fence: u8) -> Option<u8> {
        (self.fence < fence).then(|| {
            self.fence = fence;
            self.value
        })
    }

    /// `write_claimed`: `SET value = v WHERE fence = t`.
    pub(crate) fn write_claimed(&mut self, fence: u8, value: u8) -> bool {
        if self.fence == fence {
            self.value = value;
            self.writes = self.writes.saturating_add(1);
            true
        } else {
            false
        }
    }
}
