//! Verified files put into place in batches (a group commit): the files' data synced, then all
//! renamed to their final names, then the renames synced, and only then counted as done
//! ([`super::dest::Dest::place_all`]). A file under its final name is whole after a power cut, as
//! with one file at a time, but a batch of small files costs two `syncfs` calls, not an
//! `fdatasync` and a directory `fsync` each.
//!
//! Files wait here at most one control-loop tick (20 ms) or until [`PLACE_BATCH`] wait; the
//! control loop places what waits on every tick and at the end.

use super::state::Shared;
use std::sync::atomic::Ordering;

/// Verified files waiting beyond this many are placed by the thread that verified the last
/// one, so a fast stream of small files never piles up behind a slow disk.
pub(crate) const PLACE_BATCH: usize = 256;

impl Shared {
    /// Queues verified file `i` for placing; places the batch at once when it is full.
    pub(crate) fn queue_for_placing(&self, i: usize) {
        let full = {
            let mut w = self.placing.waiting.lock().unwrap();
            w.push(i);
            w.len() >= PLACE_BATCH
        };
        if full {
            self.place_waiting();
        }
    }

    /// Puts every waiting file into place. Blocks on the disk: run it off the runtime's
    /// threads. Files that cannot be placed fail the transfer (with the file named).
    pub(crate) fn place_waiting(&self) {
        let _one_at_a_time = self.placing.placing.lock().unwrap();
        let batch = std::mem::take(&mut *self.placing.waiting.lock().unwrap());
        if !batch.is_empty() {
            self.place(&batch);
        }
        self.placing.busy.store(false, Ordering::SeqCst);
    }

    fn place(&self, batch: &[usize]) {
        // 1. data synced, 2. renamed, 3. the renames synced (`Dest::place_all`)
        let names: Vec<(String, &str)> = batch
            .iter()
            .map(|&i| (self.files[i].part_rel(), self.files[i].rel()))
            .collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|(p, r)| (p.as_str(), *r)).collect();
        let dest = &self.dest;
        if let Err((k, what, e)) = dest.place_all(&pairs) {
            return self.fail(dest.failed(pairs[k].1, what, &e));
        }
        // 3. done
        for &i in batch {
            let j = &self.files[i];
            j.remove_log(dest);
            if j.checked() {
                self.verified.fetch_add(1, Ordering::SeqCst);
            }
            self.files_done.fetch_add(1, Ordering::SeqCst);
        }
    }
}
