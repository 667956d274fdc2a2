//! `wattio testbed` and `wattio dataset`: thin wrappers over `wattio-testbed`.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;
use wattio_progress::Sink;
use wattio_testbed::{
    check_bed, generate_dataset, link_profile, run_delay_line, run_with_stats, Bed, CheckConfig,
    DatasetProgress, LinkConfig, Side, UpOutcome, LINK_PROFILES,
};
use wattio_units::{format_duration, parse_duration, parse_duration_or_seconds, BitRate, ByteSize};

#[derive(Args)]
pub struct TestbedArgs {
    /// Testbed name: its namespaces are NAME-client and NAME-server.
    #[arg(long, default_value = "wattio", global = true)]
    name: String,
    #[command(subcommand)]
    cmd: TestbedCmd,
}

#[derive(Subcommand)]
enum TestbedCmd {
    /// Build the emulated WAN (idempotent) and print the client's and server's addresses.
    Up(UpArgs),
    /// Remove everything the testbed made (idempotent).
    Down,
    /// Show whether the testbed is up and with which settings.
    Status,
    /// Run a command inside the client's or the server's namespace.
    Exec(ExecArgs),
    /// Validate the running testbed: RTT, a window-limited stream, parallel streams.
    Check(CheckArgs),
    /// List the link profiles.
    Profiles,
    /// The delay-line daemon started by `up` (internal).
    #[command(hide = true)]
    DelayLine(DelayLineArgs),
}

#[derive(Args)]
struct UpArgs {
    /// A named link (see `wattio testbed profiles`); the default is cloudlab.
    #[arg(long, conflicts_with_all = ["rate", "rtt"])]
    profile: Option<String>,
    /// Bottleneck rate in both directions, e.g. 1gbit, 500mbit or 800M (bits/s).
    #[arg(long, requires = "rtt")]
    rate: Option<BitRate>,
    /// Round-trip time, e.g. 36ms.
    #[arg(long, requires = "rate", value_parser = parse_duration)]
    rtt: Option<Duration>,
    /// MTU of the path [default: 9000].
    #[arg(long)]
    mtu: Option<u32>,
    /// TCP congestion control in both namespaces [default: cubic].
    #[arg(long)]
    cc: Option<String>,
    /// Bottleneck buffer (TBF limit), e.g. 4MiB or 4000000 (bytes) [default: one BDP, at
    /// least 1 MiB].
    #[arg(long)]
    queue_bytes: Option<ByteSize>,
}

#[derive(Args)]
struct ExecArgs {
    /// Which namespace.
    side: Side,
    /// Also write as JSON: wall time, CPU time (wait4), `energy_j` = the estimated energy of a
    /// host running only this command (model: min W x vCPUs x wall + (max-min) W x its CPU s),
    /// and `attributed_j` = its CPU-time share of this machine's metered energy over the run.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

#[derive(Args)]
struct CheckArgs {
    /// Only time TCP handshakes against the RTT (a second; what CI runs).
    #[arg(long)]
    rtt_only: bool,
    /// Advertised-window clamp of the single stream, e.g. 4MiB or 4194304 (bytes).
    #[arg(long, default_value_t = ByteSize::from_bytes(4 << 20))]
    window: ByteSize,
    /// Streams of the parallel run.
    #[arg(long, default_value_t = 8)]
    streams: usize,
    /// Time counted per run (after a 2 s warm-up), up to 10m, e.g. 4s (a plain number is
    /// seconds). `--seconds` is its old name.
    #[arg(long, alias = "seconds", default_value = "4s", value_parser = parse_duration_or_seconds)]
    duration: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DelayLineArgs {
    #[arg(long)]
    one_way_us: u64,
    #[arg(long)]
    mtu: usize,
    #[arg(long)]
    ready: PathBuf,
}

pub fn testbed(a: TestbedArgs) -> Result<ExitCode> {
    let bed = Bed::new(&a.name)?;
    match a.cmd {
        TestbedCmd::Up(u) => up(&bed, u),
        TestbedCmd::Down => {
            let removed = bed.down()?;
            if removed.is_empty() {
                println!("testbed {}: nothing to remove", a.name);
            } else {
                println!("testbed {}: removed {}", a.name, removed.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        TestbedCmd::Status => match bed.is_up() {
            Some(st) => {
                println!("{}\ndelay line pid {}", st.describe(), st.pid);
                Ok(ExitCode::SUCCESS)
            }
            None => {
                println!("testbed {} is down", a.name);
                Ok(ExitCode::from(1))
            }
        },
        TestbedCmd::Exec(e) => exec(&bed, e),
        TestbedCmd::Check(c) => check(&bed, &a.name, &c),
        TestbedCmd::Profiles => {
            for p in LINK_PROFILES {
                println!("{:<18} {}", p.name, p.about);
            }
            Ok(ExitCode::SUCCESS)
        }
        TestbedCmd::DelayLine(d) => {
            run_delay_line(
                &bed,
                Duration::from_micros(d.one_way_us),
                d.mtu,
                &d.ready,
                &Sink::new(|w: &str| eprintln!("{w}")),
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `testbed up`: the link the options describe (a profile, or a rate and RTT, then the
/// overrides), brought up or found already up.
fn up(bed: &Bed, u: UpArgs) -> Result<ExitCode> {
    let mut cfg = match (&u.profile, &u.rate, &u.rtt) {
        (_, Some(r), Some(t)) => LinkConfig::new(r.bits_per_second(), *t),
        (p, _, _) => link_profile(p.as_deref().unwrap_or("cloudlab"))?,
    };
    if let Some(m) = u.mtu {
        cfg.mtu = m;
    }
    if let Some(c) = u.cc {
        cfg.cc = c;
    }
    if let Some(q) = u.queue_bytes {
        cfg.queue_bytes = q.bytes();
    }
    let exe =
        std::env::current_exe().context("cannot find the wattio binary to start the delay line")?;
    let (st, outcome) = bed.up(&cfg, &exe)?;
    if outcome == UpOutcome::AlreadyUp {
        eprintln!("testbed {} was already up with these settings", st.name);
    }
    for w in bed.daemon_warnings() {
        crate::say::warn(w);
    }
    println!("{}", st.describe());
    Ok(ExitCode::SUCCESS)
}

/// `testbed exec`: the command in a side's namespace, with `--stats` its times and energy.
fn exec(bed: &Bed, e: ExecArgs) -> Result<ExitCode> {
    let side = e.side;
    let cmd = bed.exec_command(side, &e.cmd)?;
    let code = match e.stats {
        Some(path) => {
            // The machine's energy over the run, for the command's attributed share;
            // without a meter the stats still hold the dedicated-host estimate.
            let meter_cfg = wattio_meter::MeterConfig::default();
            let meter = match wattio_meter::Meter::open(&meter_cfg) {
                Ok(m) => Some(m),
                Err(e) => {
                    crate::say::warn(format_args!(
                        "no energy meter ({e}); --stats has no attributed_j"
                    ));
                    None
                }
            };
            let s = run_with_stats(
                cmd,
                wattio_energy::ModelParams::default(),
                meter.as_ref(),
                &meter_cfg.root,
            )?;
            crate::output_file::replace_file(&path, serde_json::to_string_pretty(&s)?.as_bytes())?;
            s.exit_code
        }
        None => {
            let mut cmd = cmd;
            let st = cmd
                .status()
                .context("cannot run `ip netns exec`: install iproute2")?;
            st.code().unwrap_or(1)
        }
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `testbed check`: the link measured against its settings; exit 1 when it fails.
fn check(bed: &Bed, name: &str, c: &CheckArgs) -> Result<ExitCode> {
    let st = bed
        .is_up()
        .with_context(|| format!("testbed {} is not up: run `wattio testbed up` first", name))?;
    if c.duration.is_zero() || c.duration > Duration::from_secs(600) {
        anyhow::bail!(
            "--duration {} is out of range: use more than 0 and at most 10m",
            format_duration(c.duration)
        );
    }
    let cfg = CheckConfig {
        window_bytes: c.window.bytes(),
        streams: c.streams.max(1),
        measure: c.duration,
        rtt_only: c.rtt_only,
        ..Default::default()
    };
    let r = check_bed(bed, &st, &cfg)?;
    if c.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("{}: {}", st.name, st.link.describe());
        print!("{}", r.describe());
        println!("{}", if r.passed() { "PASS" } else { "FAIL" });
    }
    Ok(if r.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Args)]
pub struct DatasetArgs {
    #[command(subcommand)]
    cmd: DatasetCmd,
}

#[derive(Subcommand)]
enum DatasetCmd {
    /// Write the paper's small/medium/large/mixed datasets (Table II shapes) under DIR.
    Generate(GenerateArgs),
}

#[derive(Args)]
struct GenerateArgs {
    /// Output directory (DIR/NAME/ holds the files, DIR/NAME.tsv the manifest).
    dir: PathBuf,
    /// Factor applied to the number of files (sizes keep Table II's distribution).
    #[arg(long, default_value_t = 0.1)]
    scale: f64,
    /// Datasets to generate, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "small,medium,large,mixed"
    )]
    only: Vec<String>,
    /// Seed of the size and content generator.
    #[arg(long, default_value_t = 2019)]
    seed: u64,
}

pub fn dataset(a: DatasetArgs) -> Result<ExitCode> {
    let DatasetCmd::Generate(g) = a.cmd;
    // One bar per dataset, replaced when the next dataset starts.
    let bar: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);
    let progress = Sink::new(move |p: &DatasetProgress| {
        let mut bar = bar.lock().unwrap_or_else(|e| e.into_inner());
        let pb = bar.get_or_insert_with(|| {
            let pb = indicatif::ProgressBar::new(p.total_bytes);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg:>8} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            pb.set_message(p.dataset.to_string());
            pb
        });
        pb.set_position(p.done_bytes);
        if p.done_bytes >= p.total_bytes {
            pb.finish_and_clear();
            *bar = None;
        }
    });
    let sums = generate_dataset(&g.dir, &g.only, g.scale, g.seed, &progress)?;
    println!(
        "{:<8} {:>7} {:>12} {:>12} {:>12}  dir",
        "dataset", "files", "total MiB", "mean KiB", "sd KiB"
    );
    for s in sums {
        println!(
            "{:<8} {:>7} {:>12.1} {:>12.1} {:>12.1}  {}{}",
            s.name,
            s.files,
            s.total_bytes as f64 / 1048576.0,
            s.mean_bytes / 1024.0,
            s.sd_bytes / 1024.0,
            s.dir.display(),
            if s.written { "" } else { " (already there)" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
