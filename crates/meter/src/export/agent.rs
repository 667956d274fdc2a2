//! The agent's own cost, as every Prometheus exporter reports it (the `process_*` names of the
//! Prometheus client libraries, <https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics>),
//! and how its sampling clock keeps time. Read from `/proc/self` at each scrape; a field that
//! cannot be read is left out rather than reported as zero.

use crate::exposition::{MetricFamily, MetricKind};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The agent's families: CPU, resident memory, open descriptors, start time, and the sampling
/// clock (`interval`, `samples` taken, their summed `lateness_s`).
pub(super) fn families(
    started: Instant,
    interval: Duration,
    samples: u64,
    lateness_s: f64,
) -> Vec<MetricFamily<'static>> {
    let mut out = Vec::new();
    let mut one = |name: &'static str, kind, unit, help: &'static str, v: f64| {
        out.push(MetricFamily {
            name: name.into(),
            kind,
            help: help.into(),
            unit,
            samples: vec![(vec![], v)],
        })
    };
    if let Some(cpu_s) = cpu_seconds() {
        one(
            "process_cpu_seconds",
            MetricKind::Counter,
            Some("seconds"),
            "User and system CPU time of the exporter, all its threads",
            cpu_s,
        );
    }
    if let Some(rss) = resident_bytes() {
        one(
            "process_resident_memory_bytes",
            MetricKind::Gauge,
            Some("bytes"),
            "Resident memory of the exporter",
            rss as f64,
        );
    }
    if let Some(fds) = open_fds() {
        one(
            "process_open_fds",
            MetricKind::Gauge,
            None,
            "Open file descriptors of the exporter",
            fds as f64,
        );
    }
    let start = SystemTime::now()
        .checked_sub(started.elapsed())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
    if let Some(start) = start {
        one(
            "process_start_time_seconds",
            MetricKind::Gauge,
            Some("seconds"),
            "When the exporter started, in seconds since the Unix epoch",
            start.as_secs_f64(),
        );
    }
    one(
        "wattio_sample_interval_seconds",
        MetricKind::Gauge,
        Some("seconds"),
        "The period of the exporter's sampling clock (--interval): the counters are read and attributed once per period, whoever scrapes",
        interval.as_secs_f64(),
    );
    one(
        "wattio_samples",
        MetricKind::Counter,
        None,
        "Samples taken by the exporter's clock since it started",
        samples as f64,
    );
    one(
        "wattio_sample_lateness_seconds",
        MetricKind::Counter,
        Some("seconds"),
        "Summed delay between each sample's tick and its start (divide its rate by wattio_samples_total's for the mean lateness)",
        lateness_s,
    );
    out
}

/// The process's user + system CPU seconds (`/proc/self/stat` fields 14 and 15, in clock ticks).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command may hold spaces and parentheses: the fields start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / wattio_energy::attribution::cputime::ticks_per_s())
}

/// The process's resident set (`VmRSS` of `/proc/self/status`).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_reads_its_own_cost() {
        // Burn a little CPU so the figure cannot be zero on a coarse tick.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_seconds().is_some_and(|s| s > 0.0));
        assert!(resident_bytes().is_some_and(|b| b > 1024 * 1024));
        assert!(open_fds().is_some_and(|n| n >= 3));
        let f = families(Instant::now(), Duration::from_secs(2), 7, 0.5);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_ref()).collect();
        assert!(names.contains(&"process_cpu_seconds"), "{names:?}");
        let samples = f.iter().find(|f| f.name == "wattio_samples").unwrap();
        assert_eq!(samples.samples[0].1, 7.0);
        let interval = f
            .iter()
            .find(|f| f.name == "wattio_sample_interval_seconds")
            .unwrap();
        assert_eq!(interval.samples[0].1, 2.0);
    }
}
