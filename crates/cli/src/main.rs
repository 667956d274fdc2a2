//! `wattio`: the command-line front end. It parses arguments and calls the library crates;
//! the logic lives in `crates/*`.

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write as _;
use std::process::ExitCode;

mod cache_cmd;
mod calibrate_cmd;
mod closed_pipe;
mod generate_cmd;
mod iobench_cmd;
mod measure_cmd;
mod meter_cmd;
mod output_file;
mod overhead_cmd;
mod power_cmd;
mod probe_cmd;
mod report_cmd;
mod say;
mod study_ui;
mod testbed_cmd;
mod top_cmd;
mod transfer_cmd;
mod vm_cmd;

/// A switch given as `on` or `off` (`cache replay --ghost-hints`, `transfer --cpufreq`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// wattio: energy as a first-class measure of I/O.
#[derive(Parser)]
#[command(name = "wattio", version, about, propagate_version = true)]
struct Cli {
    /// No notes on standard error (what wattio chose, what it is doing); warnings and errors
    /// are still written.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List energy mechanisms, domains, units, wrap limits and permissions, with fixes.
    Probe(probe_cmd::ProbeArgs),
    /// Sample energy counters to CSV or JSON lines.
    Record(meter_cmd::RecordArgs),
    /// Run a command and report the energy it took, or compare commands (hyperfine for energy).
    Measure(measure_cmd::MeasureArgs),
    /// Live view of which process, cgroup or VM uses the energy (CPU-time share of the total).
    Top(top_cmd::TopArgs),
    /// Energy for virtual machines: `vm publish` on a host hands each guest its measured share.
    Vm(vm_cmd::VmArgs),
    /// Serve an OpenMetrics endpoint with energy counters.
    Export(meter_cmd::ExportArgs),
    /// Built-in workloads used by the demo and the overhead study.
    Workload(meter_cmd::WorkloadArgs),
    /// Write a fake /sys, /proc, /dev tree of a RAPL machine, to try wattio with WATTIO_ROOT.
    Fixture(meter_cmd::FixtureArgs),
    /// Fit the estimate's power curve against RAPL at load levels; write a model file (--model FILE).
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Java I/O energy study (ICSME 2021): JMH benchmarks measured by the meter, ranked.
    Iobench(iobench_cmd::IobenchArgs),
    /// Self-contained HTML report (inline SVG) from a directory of wattio result files.
    Report(report_cmd::ReportArgs),
    /// Measurement overhead study: workloads timed with the recorder off and at 0.1-1000 Hz.
    Overhead(overhead_cmd::OverheadArgs),
    /// Emulated WAN: client and server namespaces joined by a TUN delay line with TBF.
    Testbed(testbed_cmd::TestbedArgs),
    /// Generate the transfer paper's small/medium/large/mixed datasets, scaled.
    Dataset(testbed_cmd::DatasetArgs),
    /// Serve a directory over HTTP/1.1 (Range, pipelining, sendfile, JSON dataset listing).
    Serve(transfer_cmd::ServeArgs),
    /// Fetch a file or dataset, tuned for an SLA (min-energy, max-throughput, target:RATE).
    Transfer(transfer_cmd::TransferArgs),
    /// Energy-aware cache (Ghosts paper): replay traces against device power models, sweep the knob.
    Cache(cache_cmd::CacheArgs),
    /// Ghosts power manager on this machine's devices through the kernel's knobs (dry run by default).
    Power(power_cmd::PowerArgs),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(generate_cmd::CompletionsArgs),
    /// Write a man page for wattio and each of its commands into a directory.
    ManPages(generate_cmd::ManArgs),
}

fn main() -> ExitCode {
    closed_pipe::quiet_print_panics();
    let cli = Cli::parse();
    say::set_quiet(cli.quiet);
    say::set_command(cli.command.name());
    // A closed pipe ends any command the same quiet way, whether a command returns the EPIPE
    // or a print macro panics on it; see `closed_pipe` for why not SIGPIPE.
    let outcome = std::panic::catch_unwind(|| run(cli.command));
    match outcome {
        Ok(Ok(code)) => code,
        Ok(Err(e)) if closed_pipe::is_closed_pipe_error(&e) => closed_pipe::exit_code(),
        Ok(Err(e)) => {
            // Not eprintln!: a closed standard error must not turn the error into a panic.
            // Escaped: an error may carry a name a peer chose (a file, a URL).
            let msg = format!("{e:#}");
            let _ = writeln!(
                std::io::stderr(),
                "wattio: error: {}",
                wattio_transfer::terminal_safe(&msg)
            );
            ExitCode::from(2)
        }
        Err(panic) if closed_pipe::is_closed_pipe_print(&*panic) => closed_pipe::exit_code(),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

impl Command {
    /// The name its messages carry (`wattio top: warning: …`).
    fn name(&self) -> &'static str {
        match self {
            Command::Probe(_) => "probe",
            Command::Record(_) => "record",
            Command::Measure(_) => "measure",
            Command::Top(_) => "top",
            Command::Vm(_) => "vm",
            Command::Export(_) => "export",
            Command::Workload(_) => "workload",
            Command::Fixture(_) => "fixture",
            Command::Calibrate(_) => "calibrate",
            Command::Iobench(_) => "iobench",
            Command::Report(_) => "report",
            Command::Overhead(_) => "overhead",
            Command::Testbed(_) => "testbed",
            Command::Dataset(_) => "dataset",
            Command::Serve(_) => "serve",
            Command::Transfer(_) => "transfer",
            Command::Cache(_) => "cache",
            Command::Power(_) => "power",
            Command::Completions(_) => "completions",
            Command::ManPages(_) => "man-pages",
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Probe(a) => probe_cmd::probe(a),
        Command::Record(a) => meter_cmd::record(a),
        Command::Measure(a) => measure_cmd::measure(a),
        Command::Export(a) => meter_cmd::export(a),
        Command::Top(a) => top_cmd::top(a),
        Command::Vm(a) => vm_cmd::vm(a),
        Command::Workload(a) => meter_cmd::workload(a),
        Command::Fixture(a) => meter_cmd::fixture(a),
        Command::Calibrate(a) => calibrate_cmd::calibrate(a),
        Command::Iobench(a) => iobench_cmd::iobench(a),
        Command::Report(a) => report_cmd::report(a),
        Command::Overhead(a) => overhead_cmd::overhead(a),
        Command::Testbed(a) => testbed_cmd::testbed(a),
        Command::Dataset(a) => testbed_cmd::dataset(a),
        Command::Serve(a) => transfer_cmd::serve(a),
        Command::Transfer(a) => transfer_cmd::transfer(a),
        Command::Cache(a) => cache_cmd::cache(a),
        Command::Power(a) => power_cmd::power(a),
        Command::Completions(a) => generate_cmd::completions(a, Cli::command()),
        Command::ManPages(a) => generate_cmd::man_pages(a, Cli::command()),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every option that says where results go is `-o/--output` in every command; the old
    /// `--out` spelling is only a hidden alias, so no command shows two names for one thing.
    #[test]
    fn where_results_go_is_dash_o_output_everywhere() {
        fn walk(cmd: &clap::Command, path: &str, seen: &mut usize) {
            for arg in cmd.get_arguments() {
                let long = arg.get_long();
                assert_ne!(long, Some("out"), "{path}: --out must be --output");
                if long == Some("output") {
                    assert_eq!(arg.get_short(), Some('o'), "{path}: --output needs -o");
                    *seen += 1;
                }
                if arg.get_short() == Some('o') {
                    assert_eq!(long, Some("output"), "{path}: -o must mean --output");
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut seen = 0;
        walk(&Cli::command(), "wattio", &mut seen);
        // record, calibrate, report, overhead, iobench and cache sweep at least.
        assert!(seen >= 6, "only {seen} commands have -o/--output");
    }
}
