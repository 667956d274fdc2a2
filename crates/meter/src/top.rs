//! `wattio top`'s screen: a header with the interval's totals, its idle share, CO₂e, the
//! *estimated* warning, the meters beside the CPU and the GPUs, then one line per process,
//! cgroup or VM.

use crate::attributed::AttributedInterval;
use wattio_energy::attribution::{By, Entry, Interval};

/// A name from /proc or cgroupfs, fit for a terminal: control characters (an escape sequence
/// in a process name) become `?`, as procps does.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The live `wattio top` screen: a header with the totals, the label and the idle share, then
/// one line per entry (at most `rows`), most power first.
pub fn render_top(
    a: &AttributedInterval,
    since_start_j: f64,
    idle_since_start_j: f64,
    rows: usize,
) -> String {
    let mut s = top_header(a, since_start_j, idle_since_start_j);
    s.push('\n');
    s.push_str(&top_table(a, rows));
    s
}

/// Joules over the interval as watts (0 for an empty interval).
fn per_s(i: &Interval, j: f64) -> f64 {
    if i.interval_s > 0.0 {
        j / i.interval_s
    } else {
        0.0
    }
}

/// `top`'s header: the totals and idle share, CO₂e since start, the *estimated* warning, and a
/// line per GPU.
fn top_header(a: &AttributedInterval, since_start_j: f64, idle_since_start_j: f64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let i = &a.interval;
    let _ = writeln!(s, "wattio top — by {} — {}", a.by.as_str(), a.label);
    let _ = writeln!(
        s,
        "total {:8.2} W  {since_start_j:10.1} J since start   idle/unattributed {:7.2} W ({:4.1} %)  {idle_since_start_j:10.1} J   busy {:.2} CPU-s, unseen {:.2}",
        per_s(i, i.total_j),
        per_s(i, i.idle_j),
        if i.total_j > 0.0 { 100.0 * i.idle_j / i.total_j } else { 0.0 },
        i.busy_cpu_s,
        i.unseen_cpu_s
    );
    if let Some(c) = &a.co2e {
        // The since-start total, by the transform at the interval's intensity.
        let since_start = wattio_energy::Co2e::new(c.carbon_intensity.clone());
        let _ = writeln!(
            s,
            "CO2e {} since start at {}",
            since_start.text(since_start_j),
            since_start.label()
        );
    }
    if a.estimated {
        let _ = writeln!(
            s,
            "ESTIMATED: no hardware energy counter; every CPU figure below is a model estimate"
        );
    }
    for m in &a.beside {
        let _ = writeln!(
            s,
            "{} {} {:8.2} W   {} (beside the total, not in it)",
            m.domain,
            m.socket,
            per_s(i, m.energy_j),
            m.label.as_deref().unwrap_or("")
        );
    }
    if let Some(m) = &a.machine {
        for line in m.watt_lines("since start") {
            let _ = writeln!(s, "{line}");
        }
    }
    if let Some(k) = &i.kernel_io {
        let _ = writeln!(s, "{}", kernel_io_line(i, k));
    }
    s.push_str(&crate::disks::disk_lines(&a.disks));
    s.push_str(&crate::disks::nic_text(&a.nics));
    for g in &i.gpus {
        let _ = writeln!(
            s,
            "gpu {} {:8.2} W  idle/unattributed {:7.2} W   {}{}",
            g.index,
            per_s(i, g.energy_j),
            per_s(i, g.idle_j),
            g.label,
            g.note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
    }
    s
}

/// The kernel I/O work of an interval, in CPUs' worth: what was charged to owners by kind, what
/// had no owner, and the label.
fn kernel_io_line(i: &Interval, k: &wattio_energy::attribution::kernel_io::Summary) -> String {
    let kinds = |m: &std::collections::BTreeMap<&str, f64>| {
        m.iter()
            .map(|(kind, s)| format!("{kind} {:.3}", per_s(i, *s)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let owned: f64 = k.owned_cpu_s.values().sum();
    let unowned: f64 = k.unowned_cpu_s.values().sum();
    format!(
        "kernel I/O {:.3} CPUs charged to its owners ({}), {:.3} with no owner ({})   {}",
        per_s(i, owned),
        kinds(&k.owned_cpu_s),
        per_s(i, unowned),
        kinds(&k.unowned_cpu_s),
        k.label
    )
}

/// The heads of the columns that name an entry, after CPU % (all but by process), each with
/// its trailing space; the CGROUP column follows.
fn name_heads(by: By) -> String {
    match by {
        By::Cgroup => format!("{:<18} ", "KIND"),
        By::Vm => format!("{:<24} ", "VM"),
        By::Container => format!("{:<24} {:<32} ", "CONTAINER", "POD / IMAGE"),
        By::Pod => format!("{:<40} ", "NAMESPACE/POD"),
        By::Process => String::new(),
    }
}

/// The cells under [`name_heads`], and the entry's cgroup.
fn name_cells(by: By, e: &Entry) -> String {
    let cg = e.cgroup.as_deref().map(printable).unwrap_or_default();
    match by {
        By::Cgroup => {
            let cg = printable(e.cgroup.as_deref().unwrap_or("?"));
            format!(
                "{:<18} {}",
                wattio_energy::attribution::cgroup::kind(&cg),
                cg
            )
        }
        By::Vm => format!("{:<24} {cg}", printable(e.vm.as_deref().unwrap_or("?"))),
        By::Container => {
            let n = e.names.clone().unwrap_or_default();
            let pod = match (n.container_namespace, n.pod_name) {
                (Some(ns), Some(p)) => format!("{ns}/{p}"),
                _ => n.image.unwrap_or_default(),
            };
            let name = printable(&crate::workloads::display_name(e));
            format!("{name:<24} {:<32} {cg}", printable(&pod))
        }
        By::Pod => format!("{:<40} {cg}", printable(&crate::workloads::display_name(e))),
        By::Process => cg,
    }
}

/// `top`'s table: the column heads for `a.by`, one line per entry (at most `rows`), and what the
/// others add up to.
fn top_table(a: &AttributedInterval, rows: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let i = &a.interval;
    let carbon = a.co2e.is_some();
    let gpus = !i.gpus.is_empty();
    // Energy since start, its CO₂e beside it with a carbon intensity, and the same for the GPUs
    // where there are any.
    let pair = |j: f64, g: Option<f64>| match carbon {
        true => format!(
            "{j:>10.2} {:>11}",
            g.map(wattio_energy::format_co2e).unwrap_or_default()
        ),
        false => format!("{j:>10.2}"),
    };
    let head_pair = |j: &str, g: &str| match carbon {
        true => format!("{j:>10} {g:>11}"),
        false => format!("{j:>10}"),
    };
    let mut energy_head = head_pair("ENERGY J", "CO2E");
    if gpus {
        energy_head = format!("{energy_head} {}", head_pair("GPU J", "GPU CO2E"));
    }
    let energy_cell = |e: &Entry| {
        let cpu = pair(e.total_energy_j, e.total_co2e_g);
        match gpus {
            true => format!(
                "{cpu} {}",
                pair(e.total_gpu_energy_j.unwrap_or(0.0), e.total_gpu_co2e_g)
            ),
            false => cpu,
        }
    };
    // Where the kernel I/O program runs, the part of CPU % that is the kernel's I/O work done
    // for the entry (writeback, completions, network softirqs).
    let kio = i.kernel_io.is_some();
    let cpu_head = match kio {
        true => format!("{:>7} {:>6}", "CPU %", "KIO %"),
        false => format!("{:>7}", "CPU %"),
    };
    let cpu_cell = |e: &Entry| {
        let pct = |x: f64| 100.0 * per_s(i, x);
        match kio {
            true => format!("{:>7.1} {:>6.1}", pct(e.cpu_s), pct(e.kernel_io_cpu_s)),
            false => format!("{:>7.1}", pct(e.cpu_s)),
        }
    };
    let _ = match a.by {
        By::Process => writeln!(
            s,
            "{:>8}  {:<16} {:>9} {energy_head} {cpu_head}  CGROUP",
            "PID", "COMMAND", "POWER W"
        ),
        by => writeln!(
            s,
            "{:>9} {energy_head} {cpu_head}  {}CGROUP",
            "POWER W",
            name_heads(by)
        ),
    };
    for e in i.entries.iter().take(rows) {
        let cpu_pct = cpu_cell(e);
        let _ = match a.by {
            By::Process => writeln!(
                s,
                "{:>8}  {:<16} {:>9.3} {} {}  {}",
                e.pid.unwrap_or(0),
                printable(e.comm.as_deref().unwrap_or("?")),
                e.power_w,
                energy_cell(e),
                cpu_pct,
                printable(e.cgroup.as_deref().unwrap_or("?"))
            ),
            by => writeln!(
                s,
                "{:>9.3} {} {}  {}",
                e.power_w,
                energy_cell(e),
                cpu_pct,
                name_cells(by, e)
            ),
        };
    }
    if i.entries.len() > rows {
        let rest: f64 = i.entries[rows..].iter().map(|e| e.power_w).sum();
        let _ = writeln!(
            s,
            "… {} more entries, {rest:.3} W together",
            i.entries.len() - rows
        );
    }
    s
}
