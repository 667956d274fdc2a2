//! `wattio serve` and `wattio transfer`: argument parsing and printing; the work is in
//! `wattio_http` (the server) and `wattio_transfer` (the client).

use crate::{study_ui, OnOff};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wattio_http::{Server, ServerConfig};
use wattio_progress::Sink;
use wattio_transfer::{
    json_terminal_safe, run_transfer, terminal_safe, ClientTlsOptions, CoreBackend, EnergyFeedback,
    FixedParams, Notice, Sla, TransferOptions, TransferProgress, TransferSummary, TunerChoice,
    TunerKind, DEFAULT_MAX_CHANNELS, DEFAULT_RETRIES,
};
use wattio_units::{parse_duration, BitRate, ByteSize};

/// `wattio serve DIR [--listen ADDR]`
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Directory to serve (the dataset root).
    pub dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Connections served at once, TLS handshakes included; when all are taken, a new one
    /// replaces the connection that has waited longest without a request, and gets 503 only
    /// when none waits.
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
    /// Connections served at once to one client address; more get 503 (default: no limit of
    /// its own).
    #[arg(long, value_name = "N")]
    pub max_connections_per_client: Option<usize>,
    /// Close connections idle, or whose peer stops reading, this long, e.g. 60s.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Drop a TLS handshake not done within this, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Hash the whole tree before serving, so the first listing request is answered at once
    /// (otherwise the first request for a listing hashes what it lists).
    #[arg(long)]
    pub hash_at_start: bool,
    /// Pace each response body to this rate (e.g. 2MB/s or 16mbit); for demos and tests on
    /// loopback.
    #[arg(long)]
    pub rate_limit: Option<BitRate>,
    /// Write DIR/.wattio/listing.json (for serving the dataset with another server) and exit.
    #[arg(long)]
    pub write_listing: bool,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// `wattio transfer SOURCE DEST --sla ...`
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// SOURCE DEST, or only DEST with -i. SOURCE: http(s)://HOST/DIR/ (its wattio listing, else
    /// its directory index: nginx autoindex, Apache, python http.server), a listing URL
    /// (…/.wattio/listing.json) or a file URL. DEST: the destination directory.
    #[arg(required = true, num_args = 1..=2, value_names = ["SOURCE", "DEST"])]
    pub paths: Vec<String>,
    /// Fetch the URLs listed in FILE (`-`: standard input), one file a line, in aria2's
    /// input-file format (indented `out=NAME`, `dir=DIR`, `checksum=sha-256=HEX` lines; `#`
    /// comments). Several URLs on a line separated by TABs are mirrors of one file: it starts
    /// on the first that answers, and moves to the next when one fails.
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input_file: Option<PathBuf>,
    /// Verify files against a checksum file the publisher provides (URL or path):
    /// sha256sum/sha512sum/md5sum/sha1sum/b2sum/xxhsum output, GNU or BSD (--tag) style
    /// (bare b2sum lines only in a file named B2SUMS, *.b2 or *blake2*).
    #[arg(long, value_name = "URL|PATH")]
    pub checksum_file: Option<String>,
    /// min-energy | max-throughput | target:RATE (e.g. target:400mbit).
    #[arg(long)]
    pub sla: String,
    /// Print one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Round-trip time, e.g. 36ms (default: measured from TCP connects).
    #[arg(long, value_parser = parse_duration)]
    pub rtt: Option<Duration>,
    /// Bottleneck bandwidth, e.g. 1gbit or 800M (bits/s) (default: found by slow start).
    #[arg(long)]
    pub bandwidth: Option<BitRate>,
    /// Average TCP window of one stream, e.g. 4MiB (default: from tcp_rmem/tcp_wmem).
    #[arg(long)]
    pub window: Option<ByteSize>,
    /// Tuning algorithm.
    #[arg(long, value_enum, default_value_t = TunerKind::Wattio)]
    pub tuner: TunerKind,
    /// Files in flight (--tuner fixed).
    #[arg(long, default_value_t = 1)]
    pub cc: usize,
    /// Range streams per file (--tuner fixed).
    #[arg(long, short = 'p', default_value_t = 1)]
    pub parallelism: usize,
    /// Requests in flight per connection (--tuner fixed).
    #[arg(long, default_value_t = 1)]
    pub pipelining: usize,
    /// Most connections the tuners may open.
    #[arg(long, default_value_t = DEFAULT_MAX_CHANNELS)]
    pub max_channels: usize,
    /// Tuning interval (the algorithms' timeout), e.g. 1s or 500ms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Consecutive failed attempts per connection before giving up.
    #[arg(long, default_value_t = DEFAULT_RETRIES)]
    pub retries: u32,
    /// How active cores are applied.
    #[arg(long, value_enum, default_value_t = CoreBackend::default())]
    pub cpu_actuator: CoreBackend,
    /// Write cpufreq limits when the machine exposes them (root).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub cpufreq: OnOff,
    /// Turn off Algorithm 3 (frequency and core scaling).
    #[arg(long)]
    pub no_cpu_scaling: bool,
    /// Energy the tuners see each interval.
    #[arg(long, value_enum, default_value_t = EnergyFeedback::default())]
    pub energy_feedback: EnergyFeedback,
    /// Do not read the energy meter (the summary then has the dedicated-host estimate only, no
    /// attributed share).
    #[arg(long)]
    pub no_meter: bool,
    /// No progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Append the parameters of every interval as JSON lines to FILE.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// https: trust only the CA certificates in this PEM file instead of the system store
    /// (as curl --cacert).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// https: do not verify the certificates of the servers named on the command line
    /// (SOURCE, or the URLs of the -i list): encrypted, not authenticated, as curl -k. A server
    /// reached otherwise (a redirect elsewhere, the checksum file's host) is still verified.
    #[arg(long, short = 'k', conflicts_with = "cacert")]
    pub insecure: bool,
    /// https: do not verify any server's certificate, redirects and checksum files included.
    #[arg(long, conflicts_with = "cacert")]
    pub insecure_all: bool,
    /// Sync data to disk before recording it as fetched and around each rename into place, so
    /// that a power cut cannot leave a file or a resume record pointing at data the disk does
    /// not hold; off for scratch space (a crash of wattio itself is safe either way).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub fsync: OnOff,
}

pub fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if a.write_listing {
        let p = wattio_http::write_listing(&a.dir)
            .with_context(|| format!("cannot list {}", a.dir.display()))?;
        eprintln!("wattio serve: wrote {}", p.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut cfg = ServerConfig::new(&a.dir);
    cfg.max_connections = a.max_connections;
    cfg.max_connections_per_client = a.max_connections_per_client;
    cfg.idle_timeout = a.idle_timeout;
    cfg.handshake_timeout = a.handshake_timeout;
    cfg.warnings = Sink::new(|w: &str| crate::say::warn(w));
    cfg.rate_limit = a.rate_limit.map(BitRate::bytes_per_second);
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        cfg.tls = Some(wattio_http::tls_server_config(cert, key)?);
    }
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let server = Server::bind(cfg, &a.listen).await?;
        let addr = server.local_addr()?;
        if a.hash_at_start {
            eprintln!("wattio serve: hashing {} before serving…", a.dir.display());
            let t = std::time::Instant::now();
            let (files, bytes) = tokio::task::block_in_place(|| server.hash_tree())
                .with_context(|| format!("cannot list {}", a.dir.display()))?;
            eprintln!(
                "wattio serve: hashed {files} files, {:.1} MB, in {:.1} s",
                bytes as f64 / 1e6,
                t.elapsed().as_secs_f64()
            );
        }
        eprintln!(
            "wattio serve: listening on {scheme}://{addr}/ (root {}); listing at {scheme}://{addr}/{}",
            a.dir.display(),
            wattio_http::LISTING_PATH
        );
        server.run().await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn transfer(a: TransferArgs) -> anyhow::Result<ExitCode> {
    let o = transfer_options(&a)?;
    // Ctrl-C or SIGTERM ends the transfer through its error path (CPU settings restored,
    // partial data kept), with status 2 and a line saying how to resume.
    let cancel = study_ui::cancel_on_signals()?;
    let s = match run_transfer(&o, &cancel) {
        // TransferError::Cancelled, or another error that stopped it while a signal came
        Err(e) if cancel.is_set() => {
            return Err(anyhow::Error::new(e).context(format!(
                "interrupted by {}",
                study_ui::interrupting_signal()
            )))
        }
        r => r?,
    };
    if a.json {
        let json = serde_json::to_string_pretty(&s)?;
        println!("{}", json_terminal_safe(&json));
    } else {
        print_summary(&s);
    }
    if !s.failed_lines.is_empty() {
        // as wget and aria2 do: the rest of the list is copied, and the exit status says not all
        let n = s.failed_lines.len();
        bail!(
            "{n} line{} of the URL list could not be fetched (every other file was copied): {}; fix or remove {} and rerun",
            if n == 1 { "" } else { "s" },
            wattio_transfer::failed_lines_message(&s.failed_lines),
            if n == 1 { "that line" } else { "those lines" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The library's options from the command line, each value checked.
fn transfer_options(a: &TransferArgs) -> anyhow::Result<TransferOptions> {
    let sla = Sla::parse(&a.sla).map_err(|e| anyhow!("--sla: {e}"))?;
    let (source, dest) = match (&a.input_file, a.paths.as_slice()) {
        (None, [src, dst]) => (src.clone(), PathBuf::from(dst)),
        (None, [_]) => bail!("give SOURCE and DEST (or -i FILE DEST for a URL list)"),
        (Some(_), [dst]) => (String::new(), PathBuf::from(dst)),
        (Some(_), _) => bail!("with -i FILE give only DEST: the URLs come from FILE"),
        _ => bail!("give SOURCE and DEST"),
    };
    let mut o = TransferOptions::new(source, dest, sla);
    o.discovery.input_file = a.input_file.clone();
    o.discovery.checksum_file = a.checksum_file.clone();
    o.tuning.rtt = a.rtt;
    o.tuning.bandwidth_bps = a.bandwidth.map(|r| r.bits_per_second() as f64);
    o.tuning.window_bytes = a.window.map(ByteSize::bytes);
    if a.max_channels == 0 || a.cc == 0 || a.parallelism == 0 || a.pipelining == 0 {
        bail!("--max-channels, --cc, --parallelism and --pipelining must be at least 1");
    }
    o.tuning.max_ch = a.max_channels;
    o.tuning.tuner = TunerChoice::of_kind(
        a.tuner,
        FixedParams {
            cc: a.cc,
            p: a.parallelism,
            pp: a.pipelining,
        },
    );
    o.tuning.interval = a.interval;
    if o.tuning.interval < Duration::from_millis(50) {
        bail!("--interval must be at least 50ms");
    }
    o.data.retries = a.retries;
    o.tuning.core_backend = a.cpu_actuator;
    o.tuning.cpufreq = a.cpufreq == OnOff::On;
    o.tuning.cpu_scaling = !a.no_cpu_scaling && a.tuner == TunerKind::Wattio;
    o.tuning.meter = !a.no_meter;
    o.tuning.energy_feedback = a.energy_feedback;
    if !a.no_progress && !a.json {
        o.tuning.progress = progress_bar();
    }
    o.notices = Sink::new(|n: &Notice| match n {
        Notice::Warning(w) => crate::say::warn(w),
        Notice::Note(m) => crate::say::note(m),
    });
    o.tuning.log = a.log.clone();
    o.data.tls = ClientTlsOptions {
        cacert: a.cacert.clone(),
        insecure: a.insecure,
        insecure_all: a.insecure_all,
    };
    o.data.fsync = a.fsync == OnOff::On;
    Ok(o)
}

/// The summary a person reads (`--json` prints the whole summary instead).
fn print_summary(s: &TransferSummary) {
    println!(
        "{} files ({} already complete), {:.1} MB in {:.2} s = {:.1} Mbit/s, {} {}, {} reconnects",
        s.files,
        s.files_skipped,
        s.bytes as f64 / 1e6,
        s.seconds,
        s.throughput_mbps,
        s.tuner,
        s.sla,
        s.reconnects
    );
    if s.resumed_bytes > 0 {
        println!(
            "resumed: {:.1} MB were already there",
            s.resumed_bytes as f64 / 1e6
        );
    }
    match &s.energy {
        Some(e) => println!(
            "energy: {:.1} J, mean {:.2} W — {}; {}",
            e.total_j, e.mean_power_w, e.provenance, e.scope
        ),
        None => println!(
            "energy: not measured ({})",
            s.energy_note.as_deref().unwrap_or("")
        ),
    }
    let pe = &s.energy_process;
    println!(
        "estimated energy of a host running only this process: {:.1} J ({:.2} s CPU) — {}; model: min W x vCPUs x wall + (max-min) W x its CPU s; tuner fed by {}",
        pe.total_j, pe.cpu_s, pe.provenance, s.energy_feedback
    );
    if let (Some(j), Some(label)) = (pe.attributed_j, pe.attributed_label.as_deref()) {
        println!("this process's share of the machine's energy: {j:.1} J — {label}");
    }
    // the disks' own power figures (model names) come from sysfs: escaped like peer names
    for line in s.dest_disks.iter().flat_map(|d| d.text_lines()) {
        println!("{}", terminal_safe(&line));
    }
    println!(
        "source: {}{}",
        s.source_kind,
        s.source_detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    );
    for w in &s.whole_file_streams {
        println!("note: {}", terminal_safe(w));
    }
    if !s.mirrors.is_empty() {
        let fell_back: Vec<_> = s
            .mirrors
            .iter()
            .filter(|m| !m.fallbacks.is_empty())
            .collect();
        println!(
            "mirrors: {} files with mirrors, {} served after a fallback",
            s.mirrors.len(),
            fell_back.len()
        );
        for m in fell_back.iter().take(5) {
            println!("  {}", terminal_safe(&m.describe()));
        }
    }
    print_verification(&s.verification);
    if let Some(r) = s.cpu_actuator.last() {
        use wattio_transfer::KnobOutcome;
        let show = |o: &KnobOutcome| match o {
            KnobOutcome::Applied(d) => format!("applied ({d})"),
            KnobOutcome::Unavailable(d) => format!("not available ({d})"),
            KnobOutcome::Failed(d) => format!("FAILED ({d})"),
        };
        println!(
            "cpu (last setting): cores {}; frequency {}",
            show(&r.cores),
            show(&r.frequency)
        );
    }
}

/// The summary's lines on how the files were checked, by how much each check is worth
/// against a hostile server; every name a peer gave is escaped.
fn print_verification(v: &wattio_transfer::Verification) {
    let mut by = Vec::new();
    if v.by_listing > 0 {
        by.push(format!("{} files by XXH3-64 (listing)", v.by_listing));
    }
    if v.by_publisher > 0 {
        let from = v
            .checksum_file
            .as_ref()
            .map(|c| format!("{} ({})", c.algorithms.join(", "), terminal_safe(&c.source)))
            .unwrap_or_else(|| "the URL list's checksum= digests".to_string());
        by.push(format!("{} files by {from}", v.by_publisher));
    }
    if by.is_empty() {
        by.push("none by checksum".to_string());
    }
    println!("verified: {}; all by size", by.join(", "));
    // the first five of `total` names
    let list = |names: &[String], total: usize| {
        let shown: Vec<String> = names
            .iter()
            .take(5)
            .map(|n| terminal_safe(n).into_owned())
            .collect();
        let more = if total > shown.len() { ", …" } else { "" };
        format!("{}{more}", shown.join(", "))
    };
    if v.collision_resistant + v.integrity_only > 0 {
        let weak = if v.integrity_only > 0 {
            format!(": {}", list(&v.integrity_only_files, v.integrity_only))
        } else {
            String::new()
        };
        println!(
            "  {} by a collision-resistant digest (SHA-2, BLAKE2b: a hostile server cannot forge it), {} only by XXH3-64, xxHash, MD5 or SHA-1 (they catch corruption, not a server that lies){weak}",
            v.collision_resistant, v.integrity_only
        );
    }
    if v.unverified > 0 {
        println!(
            "UNVERIFIED (size only, no checksum given): {} files: {}",
            v.unverified,
            list(&v.unverified_files, v.unverified)
        );
    }
    if !v.restarted.is_empty() {
        println!(
            "restarted: {} files changed on the server since the earlier run (ETag or Last-Modified), so their earlier copy was dropped and they were fetched whole: {}",
            v.restarted.len(),
            list(&v.restarted, v.restarted.len())
        );
    }
    if !v.resumed_unchecked.is_empty() {
        println!(
            "UNCHECKED RESUME: {} files were resumed from an earlier run's partial copy with neither a validator (ETag, Last-Modified) nor a checksum to show the server's file did not change meanwhile: {}",
            v.resumed_unchecked.len(),
            list(&v.resumed_unchecked, v.resumed_unchecked.len())
        );
    }
}

/// The transfer's progress bar on stderr (indicatif draws it only on a terminal).
fn progress_bar() -> Sink<TransferProgress> {
    let pb = indicatif::ProgressBar::new(0);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Sink::new(move |p: &TransferProgress| {
        if p.finished {
            pb.finish_and_clear();
            return;
        }
        pb.set_length(p.planned_bytes);
        pb.set_position(p.done_bytes);
        let listing = if p.total_known {
            ""
        } else {
            " (still listing the index: total not known yet)"
        };
        pb.set_message(format!("{}{listing}", p.status.as_deref().unwrap_or("")));
    })
}
