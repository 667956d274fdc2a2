//! Pacing: EETT's rate cap, applied by holding reads back.

use super::state::Shared;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(crate) async fn pace(sh: &Shared) {
    // sleep in short steps so a lifted or changed cap takes effect quickly
    loop {
        let cap = sh.rate_cap.load(Ordering::Relaxed);
        if cap == 0 {
            return;
        }
        let (t0, b0) = *sh.cap_epoch.lock().unwrap();
        let got = sh.received.load(Ordering::Relaxed).saturating_sub(b0);
        let due = Duration::from_secs_f64(got as f64 * 8.0 / cap as f64);
        let el = t0.elapsed();
        if due <= el {
            return;
        }
        sh.cap_waits.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep((due - el).min(Duration::from_millis(100))).await;
    }
}
