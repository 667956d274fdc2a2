//! A scrape's body rendered ahead, on the sampling clock, when a scrape is due before the next
//! sample: the scrape then copies it out instead of waiting for a sample in progress (which
//! holds the totals) and rendering thousands of series itself. With 10,000 per-process series
//! beside 20,000 tasks that wait and that rendering were most of a scrape's time.
//!
//! The body is the one the scrape would have rendered: it is used only while no newer sample
//! exists, and in the format the scraper asked for last. When the prediction misses (the first
//! scrape, a scraper that changes its period), the scrape renders as before.

use crate::exposition::ExpositionFormat;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct RenderedAhead {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The body, the sample it shows and its format.
    body: Option<(u64, ExpositionFormat, Arc<String>)>,
    /// The last scrape: when, and in which format.
    last: Option<(Instant, ExpositionFormat)>,
    /// The time between the last two scrapes.
    gap: Option<Duration>,
}

impl RenderedAhead {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a scrape at `now` in `format`; returns the body rendered ahead for `sample` in
    /// that format, if there is one.
    pub(super) fn scraped(
        &self,
        now: Instant,
        format: ExpositionFormat,
        sample: u64,
    ) -> Option<Arc<String>> {
        let mut s = self.state();
        if let Some((at, _)) = s.last {
            s.gap = Some(now.saturating_duration_since(at));
        }
        s.last = Some((now, format));
        match &s.body {
            Some((n, f, body)) if *n == sample && *f == format => Some(body.clone()),
            _ => None,
        }
    }

    /// The format to render in now, just after a sample at `now`, when the next scrape is
    /// expected before the next sample (`interval` away) and the scraper has not gone quiet.
    pub(super) fn wanted(&self, now: Instant, interval: Duration) -> Option<ExpositionFormat> {
        let s = self.state();
        let (at, format) = s.last?;
        let gap = s.gap?;
        let next = at + gap;
        let due_before_next_sample = next < now + interval;
        let still_scraping = now.saturating_duration_since(at) < gap * 2 + interval;
        (due_before_next_sample && still_scraping).then_some(format)
    }

    /// Keeps `body`, rendered for `sample` in `format`.
    pub(super) fn store(&self, sample: u64, format: ExpositionFormat, body: String) {
        self.state().body = Some((sample, format, Arc::new(body)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_body_is_rendered_ahead_only_for_a_scrape_due_before_the_next_sample() {
        let r = RenderedAhead::default();
        let t0 = Instant::now();
        let text = ExpositionFormat::Prometheus;
        // no scrape yet, then one scrape: no period known
        assert_eq!(r.wanted(t0, S), None);
        assert!(r.scraped(t0, text, 1).is_none());
        assert_eq!(r.wanted(t0 + S / 2, S), None);
        // scraped every 15 s, sampled every second: only the sample in the second before the
        // next scrape renders
        assert!(r.scraped(t0 + 15 * S, text, 15).is_none());
        assert_eq!(r.wanted(t0 + 16 * S, S), None);
        assert_eq!(r.wanted(t0 + 29 * S + S / 2, S), Some(text));
        r.store(29, text, "body".into());
        assert_eq!(
            r.scraped(t0 + 30 * S, text, 29)
                .as_deref()
                .map(String::as_str),
            Some("body")
        );
        // a newer sample, or another format, than the body's: rendered by the scrape
        r.store(44, text, "body".into());
        assert!(r.scraped(t0 + 45 * S, text, 45).is_none());
        r.store(59, text, "body".into());
        assert!(r
            .scraped(t0 + 60 * S, ExpositionFormat::OpenMetrics, 59)
            .is_none());
        // the scraper went away: nothing rendered any more
        assert_eq!(r.wanted(t0 + 120 * S, S), None);
    }
}
