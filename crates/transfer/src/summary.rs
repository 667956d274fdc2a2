//! The `--json` summary of a transfer and everything in it: the per-interval log, the energy
//! figures, verification, mirrors and the checksum file. `wattio report` reads a summary as
//! `wattio_results::ReportedTransfer`, the fields of it its page shows.

use crate::actuator::ApplyReport;
use crate::dest_disks::DestDisks;
use serde::{Deserialize, Serialize};
use wattio_tuner::{NetParams, TransferPlan};
// The interval log is read back by `wattio report`: it lives with the result schemas.
pub use wattio_results::IntervalLog;

/// What `ProcessEnergy::total_j` is.
pub use wattio_energy::HOST_ESTIMATE_SCOPE;

/// This process's energy figures over the transfer.
///
/// `total_j` is the **estimated energy of a host running only this process** (a dedicated
/// client host): the model with this process's CPU time as the host's busy time, summed over
/// intervals — `min W × vCPUs it may use × Δt + (max − min) W × its CPU s`. It is what ME's
/// `process-estimate` feedback sees and what `docs/results/transfer.md` reports; it is not this
/// process's share of the machine's energy. That is `attributed_j`: the CPU-time share
/// (`wattio_energy::attribution::share_j`) of the meter's whole-machine energy over the transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessEnergy {
    /// Estimated energy of a host running only this process, J.
    pub total_j: f64,
    /// `total_j` per GB received.
    pub joules_per_gb: Option<f64>,
    /// CPU seconds of this process over the transfer (`CLOCK_PROCESS_CPUTIME_ID`).
    pub cpu_s: f64,
    /// Always true: `total_j` is a model estimate.
    pub estimated: bool,
    /// Provenance of `total_j`: `estimated (model: ...)`.
    pub provenance: String,
    /// What `total_j` is ([`HOST_ESTIMATE_SCOPE`]).
    pub scope: String,
    /// This process's CPU-time share of the meter's whole-machine energy over the transfer:
    /// `share_j(energy.total_j, online CPUs, meter window s, cpu_s)`; `None` without a meter.
    pub attributed_j: Option<f64>,
    /// `attributed_j` per GB received.
    pub attributed_joules_per_gb: Option<f64>,
    /// Label of `attributed_j`, e.g. `measured (perf), attributed (cpu-time share)`.
    pub attributed_label: Option<String>,
}

impl ProcessEnergy {
    /// The figures from the dedicated-host estimate `host_j`, this process's CPU seconds over
    /// the transfer, and the meter's whole-machine report over the same window (if any) on a
    /// machine of `n_cpus` online CPUs.
    pub fn new(
        host_j: f64,
        cpu_s: f64,
        received: u64,
        model: &wattio_energy::ModelParams,
        system: Option<&wattio_meter::EnergyReport>,
        n_cpus: usize,
    ) -> ProcessEnergy {
        let per_gb = |j: f64| (received > 0).then(|| j / (received as f64 / 1e9));
        let attributed_j = system
            .map(|r| wattio_energy::attribution::share_j(r.total_j, n_cpus, r.duration_s, cpu_s));
        ProcessEnergy {
            total_j: host_j,
            joules_per_gb: per_gb(host_j),
            cpu_s,
            estimated: true,
            provenance: wattio_energy::Provenance::estimated(model.name()).label(),
            scope: HOST_ESTIMATE_SCOPE.into(),
            attributed_j,
            attributed_joules_per_gb: attributed_j.and_then(per_gb),
            attributed_label: system
                .map(|r| wattio_energy::attribution::attributed_label(&r.provenance_label())),
        }
    }
}

/// Energy over the transfer, with its provenance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnergySummary {
    pub total_j: f64,
    pub mean_power_w: f64,
    pub joules_per_gb: Option<f64>,
    /// Where `total_j` comes from; written as the `mechanism`, `estimated` and `model` fields.
    #[serde(flatten)]
    pub source: wattio_energy::Provenance,
    /// `source`'s label, e.g. "estimated (model: ccf-linear(...))" — system-wide, not this
    /// process alone.
    pub provenance: String,
    pub scope: String,
}

/// How the files of a transfer were checked beyond their size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verification {
    /// Files checked against a wattio listing's XXH3-64.
    pub by_listing: usize,
    /// Files checked against a publisher's digest (`--checksum-file`, a URL list's `checksum=`).
    pub by_publisher: usize,
    /// Files checked by size only: nothing gave a checksum for them.
    pub unverified: usize,
    /// Their paths (at most [`UNVERIFIED_LISTED`]).
    pub unverified_files: Vec<String>,
    /// The checksum file, when one was given.
    pub checksum_file: Option<ChecksumFileReport>,
    /// Of the files checked by a digest, those checked by a collision-resistant one (SHA-2,
    /// BLAKE2b): only these are safe against a hostile server or mirror. XXH3-64 (a wattio
    /// listing), xxHash, MD5 and SHA-1 detect corruption, not forgery.
    #[serde(default)]
    pub collision_resistant: usize,
    /// Files a digest checked, none of them collision-resistant: they are safe against
    /// corruption, not against a hostile server.
    #[serde(default)]
    pub integrity_only: usize,
    /// Their paths (at most [`UNVERIFIED_LISTED`]).
    #[serde(default)]
    pub integrity_only_files: Vec<String>,
    /// Files whose copy from an earlier run was dropped because the server's validators
    /// (`ETag`, `Last-Modified`) say the file changed since: fetched again from the start.
    #[serde(default)]
    pub restarted: Vec<String>,
    /// Files resumed from an earlier run's partial copy that neither a validator nor a
    /// checksum confirms is of the server's current version.
    #[serde(default)]
    pub resumed_unchecked: Vec<String>,
}

/// What the summary says about the checksum file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChecksumFileReport {
    /// The URL or path given.
    pub source: String,
    /// Algorithms its lines use (`sha256`, `md5`, `xxh3-64`, …).
    pub algorithms: Vec<String>,
    /// Checksum lines in it.
    pub entries: usize,
    /// Files of this transfer that one of its lines is for.
    pub matched: usize,
    /// 1-based numbers of lines that were not checksum lines (ignored).
    pub malformed_lines: Vec<usize>,
}

/// One move of a file to its next mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorFallback {
    /// The URL that failed.
    pub from: String,
    /// The URL the file's remaining bytes came from next.
    pub to: String,
    /// What failed (`HTTP 500`, `cannot be reached: …`).
    pub reason: String,
    /// `start` (found while sizing the files) or `transfer` (while fetching them).
    pub during: String,
}

/// What the summary says about a file that has mirrors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorReport {
    /// The file, relative to the destination.
    pub file: String,
    /// The URL its last bytes came from.
    pub served_by: String,
    /// URLs on its line, the first included.
    pub mirrors: usize,
    /// Each move to the next mirror, in order.
    pub fallbacks: Vec<MirrorFallback>,
}

impl MirrorReport {
    /// One line for a person: `f.bin from http://b/f.bin (after http://a/f.bin: HTTP 500)`.
    pub fn describe(&self) -> String {
        let after: Vec<String> = self
            .fallbacks
            .iter()
            .map(|f| format!("{}: {}", f.from, f.reason))
            .collect();
        if after.is_empty() {
            format!("{} from {}", self.file, self.served_by)
        } else {
            format!(
                "{} from {} (after {})",
                self.file,
                self.served_by,
                after.join("; ")
            )
        }
    }
}

/// Most unverified paths the summary lists.
pub const UNVERIFIED_LISTED: usize = 1000;

/// The `--json` summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferSummary {
    pub source: String,
    /// How the files were found: `wattio-listing`, `directory-index`, `url-list`, `file-url`.
    pub source_kind: String,
    /// The index's generator for `directory-index` (`nginx autoindex (json)`, …).
    pub source_detail: Option<String>,
    /// Servers that ignore `Range` (each of their files came as one whole-file stream), with
    /// what that means; empty when every server honours `Range`.
    pub whole_file_streams: Vec<String>,
    /// What the user should know about the source (ignored options, skipped entries).
    pub notes: Vec<String>,
    /// Files of a URL list whose line names mirrors: the URL that served each, and every
    /// fallback to the next mirror (empty without mirrors).
    pub mirrors: Vec<MirrorReport>,
    /// URL-list lines none of whose URLs answered: every other file was copied, and the
    /// command ends with an error naming them (see [`failed_lines_message`]).
    #[serde(default)]
    pub failed_lines: Vec<FailedLine>,
    pub dest: String,
    pub sla: String,
    pub tuner: String,
    pub files: usize,
    /// Files already complete and verified in DEST before this run.
    pub files_skipped: usize,
    /// Files checked by a checksum (listing or publisher); see `verification`.
    pub files_verified_checksum: usize,
    pub verification: Verification,
    pub total_bytes: u64,
    /// Payload bytes received by this run.
    pub bytes: u64,
    /// Bytes found complete (files or ranges) from an earlier run.
    pub resumed_bytes: u64,
    pub seconds: f64,
    pub throughput_bps: f64,
    pub throughput_mbps: f64,
    pub reconnects: u64,
    pub energy: Option<EnergySummary>,
    pub energy_note: Option<String>,
    /// The estimated energy of a host running only this process (always present) and, with a
    /// meter, this process's attributed share of the machine's energy.
    pub energy_process: ProcessEnergy,
    /// What fed the tuner: "meter" or "process-estimate".
    pub energy_feedback: String,
    /// The disks holding DEST: each one's energy interval over the run and per GB received,
    /// labelled with its model, or why there is none; `None` in summaries written before
    /// wattio measured them.
    #[serde(default)]
    pub dest_disks: Option<DestDisks>,
    pub net: NetParams,
    pub params_initial: TransferPlan,
    pub cpu_actuator: Vec<ApplyReport>,
    pub intervals: Vec<IntervalLog>,
}

/// `s` made safe to print on a terminal: control characters (C0, DEL, C1) and Unicode
/// bidirectional controls are written as `\u{..}` escapes, so a file name, URL or message a
/// peer chose cannot move the cursor, recolour or clear the screen, forge a line of output or
/// reorder what is shown. Everything else, other languages' letters included, is kept.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a character could steer a terminal: a control character (C0, DEL, C1) or a Unicode
/// bidirectional control.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A JSON document made safe to print on a terminal, still the same JSON: the characters
/// [`terminal_safe`] escapes that a JSON writer leaves as they are (DEL, C1 controls,
/// bidirectional controls; C0 controls are escaped already) become `\uXXXX` escapes, which
/// can only stand inside strings.
pub fn json_terminal_safe(json: &str) -> std::borrow::Cow<'_, str> {
    if !json
        .chars()
        .any(|c| unsafe_char(c) && !matches!(c, '\n' | '\r' | '\t'))
    {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if unsafe_char(c) && !matches!(c, '\n' | '\r' | '\t') {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_names_cannot_steer_the_terminal() {
        assert_eq!(terminal_safe("données/a b.bin"), "données/a b.bin");
        assert_eq!(
            terminal_safe("a\x1b[2Jb\nwattio: done\r\u{202e}txt.exe\u{9b}"),
            "a\\u{1b}[2Jb\\u{a}wattio: done\\u{d}\\u{202e}txt.exe\\u{9b}"
        );
        assert!(matches!(
            terminal_safe("plain"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn process_energy_keeps_the_host_estimate_and_adds_the_attributed_share() {
        let model = wattio_energy::ModelParams::default();
        // 10 s on 4 CPUs, 2.5 CPU-s of ours, 2 GB; the meter saw 120 J on the whole machine.
        let host_j = model.energy_j(4, 10.0, 2.5);
        let report = wattio_meter::EnergyReport {
            duration_s: 10.0,
            provenance: wattio_energy::Provenance::measured(wattio_energy::Mechanism::Powercap),
            domains: vec![],
            total_j: 120.0,
            psys_j: None,
            gpu_j: None,
            gpu_label: None,
            read_errors: vec![],
        };
        let pe = ProcessEnergy::new(host_j, 2.5, 2_000_000_000, &model, Some(&report), 4);
        assert_eq!(pe.total_j, host_j);
        assert_eq!(pe.joules_per_gb, Some(host_j / 2.0));
        assert_eq!(pe.scope, HOST_ESTIMATE_SCOPE);
        assert!(pe.provenance.starts_with("estimated (model: ccf-linear"));
        let a = pe.attributed_j.unwrap();
        assert_eq!(a, wattio_energy::attribution::share_j(120.0, 4, 10.0, 2.5));
        // 120 J × 2.5 / (4 × 10) = 7.5 J, within the window's total.
        assert!((a - 7.5).abs() < 1e-12 && a <= report.total_j);
        assert_eq!(pe.attributed_joules_per_gb, Some(a / 2.0));
        assert_eq!(
            pe.attributed_label.as_deref(),
            Some("measured (powercap), attributed (cpu-time share)")
        );
        let none = ProcessEnergy::new(host_j, 2.5, 0, &model, None, 4);
        assert!(none.attributed_j.is_none() && none.attributed_label.is_none());
        assert!(none.joules_per_gb.is_none());
    }
}

/// A URL-list line none of whose URLs answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedLine {
    /// `urls.txt:7`.
    pub line: String,
    /// The line's first URL (where it redirected to, when it did).
    pub url: String,
    /// Why: `answers HTTP 404`, `cannot be reached: …`, or for a line with mirrors each URL
    /// with its answer.
    pub why: String,
}

/// Lines listed in full in [`failed_lines_message`] for each cause; the rest are counted.
const LINES_NAMED_PER_CAUSE: usize = 3;
/// Causes told in [`failed_lines_message`]; the rest are counted.
const CAUSES_TOLD: usize = 3;

/// One line on `failed`: the lines grouped by cause (a server that cannot be reached fails
/// every line it serves for one reason, told once), a few named per cause.
pub fn failed_lines_message(failed: &[FailedLine]) -> String {
    let mut causes: Vec<(&str, Vec<&FailedLine>)> = Vec::new();
    for f in failed {
        match causes.iter_mut().find(|(why, _)| *why == f.why) {
            Some((_, lines)) => lines.push(f),
            None => causes.push((&f.why, vec![f])),
        }
    }
    let told: Vec<String> = causes
        .iter()
        .take(CAUSES_TOLD)
        .map(|(why, lines)| {
            let first = lines[0];
            let others: Vec<&str> = lines[1..]
                .iter()
                .take(LINES_NAMED_PER_CAUSE - 1)
                .map(|l| l.line.as_str())
                .collect();
            let more = match lines.len() - 1 {
                0 => String::new(),
                n if n > others.len() => {
                    format!(" and {n} more lines ({}, …)", others.join(", "))
                }
                n => format!(
                    " and {n} more line{} ({})",
                    if n == 1 { "" } else { "s" },
                    others.join(", ")
                ),
            };
            format!("{} {}{more} {why}", first.line, first.url)
        })
        .collect();
    let rest = match causes.len().saturating_sub(CAUSES_TOLD) {
        0 => String::new(),
        n => format!(" (and {n} more causes)"),
    };
    format!("{}{rest}", told.join("; "))
}

#[cfg(test)]
mod failed_lines_tests {
    use super::*;

    fn line(n: usize, why: &str) -> FailedLine {
        FailedLine {
            line: format!("urls.txt:{n}"),
            url: format!("https://h/f{n}"),
            why: why.to_string(),
        }
    }

    #[test]
    fn failed_lines_are_told_once_per_cause() {
        assert_eq!(
            failed_lines_message(&[line(3, "answers HTTP 404")]),
            "urls.txt:3 https://h/f3 answers HTTP 404"
        );
        let unreachable = "cannot be reached: connection refused";
        let many: Vec<FailedLine> = (1..=1000).map(|n| line(n, unreachable)).collect();
        assert_eq!(
            failed_lines_message(&many),
            "urls.txt:1 https://h/f1 and 999 more lines (urls.txt:2, urls.txt:3, …) cannot be reached: connection refused"
        );
        assert_eq!(
            failed_lines_message(&[
                line(2, "answers HTTP 404"),
                line(4, unreachable),
                line(7, "answers HTTP 404"),
            ]),
            "urls.txt:2 https://h/f2 and 1 more line (urls.txt:7) answers HTTP 404; urls.txt:4 https://h/f4 cannot be reached: connection refused"
        );
        let causes: Vec<FailedLine> = (1..=5)
            .map(|n| line(n, &format!("answers HTTP 50{n}")))
            .collect();
        assert!(failed_lines_message(&causes)
            .ends_with("urls.txt:3 https://h/f3 answers HTTP 503 (and 2 more causes)"));
    }
}
