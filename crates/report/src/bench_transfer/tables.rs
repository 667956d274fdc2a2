//! The markdown tables of a bench: per dataset, what TLS costs, the goals, EETT.

use super::cells::{eett_variant, first_max_by, first_min_by, tool_key};
use super::{BenchCell, BenchTransfer, EETT_TOLERANCE, TLS_PAIRS};
use wattio_results::{Align, Table};

/// A table of these columns, `L` plain (text) and `R` right-aligned (figures).
fn table(columns: &[(&str, char)]) -> Table {
    let columns: Vec<(&str, Align)> = columns
        .iter()
        .map(|&(name, a)| (name, if a == 'R' { Align::Right } else { Align::Plain }))
        .collect();
    Table::new(&columns)
}

/// A table's Markdown as the lines the page is built of.
fn lines(t: &Table) -> impl Iterator<Item = String> + '_ {
    t.markdown()
        .lines()
        .map(String::from)
        .collect::<Vec<_>>()
        .into_iter()
}

impl BenchTransfer {
    /// The markdown tables: per dataset, what TLS costs, the goals on the HTTPS rows, EETT.
    pub fn markdown(&self) -> String {
        let link = self.link_mbit;
        let reps = self.cells.iter().map(|c| c.n).max().unwrap_or(0);
        let mut md: Vec<String> = vec![
            format!(
                "Link {link:.0} Mbit/s, RTT {rtt:.0} ms. Client energy is ESTIMATED: {model} applied to the \
                 client tool's CPU time (idle share for the whole VM over the wall time); system-wide is \
                 `wattio measure` (also estimated here) and includes the server, the delay line and other load. \
                 Up to {reps} runs per cell: every figure is the median over the complete runs; \
                 the Mbit/s column gives the range in brackets.",
                rtt = self.rtt_ms,
                model = self.model
            ),
            String::new(),
        ];
        let base = self.base();
        for d in self.datasets() {
            let mut dr: Vec<&BenchCell> =
                base.iter().copied().filter(|c| c.dataset() == d).collect();
            dr.sort_by(|a, b| tool_key(a.tool()).cmp(&tool_key(b.tool())));
            let Some(r0) = dr.first() else { continue };
            md.push(format!(
                "### {d} ({} files, {:.0} MB)",
                r0.typical.want_files,
                r0.typical.want_bytes as f64 / 1e6
            ));
            md.push(String::new());
            let mut tab = table(&[
                ("tool", 'L'),
                ("complete", 'L'),
                ("time s", 'R'),
                ("Mbit/s [range]", 'R'),
                ("% link", 'R'),
                ("client CPU s", 'R'),
                ("client J (est.)", 'R'),
                ("J/GB (est.)", 'R'),
                ("nginx CPU s", 'R'),
                ("system J (est.)", 'R'),
            ]);
            for r in dr {
                let t = &r.typical;
                let comp = if r.complete {
                    format!("{}/{}", r.n_complete, r.n)
                } else {
                    format!(
                        "NO: {}/{} (exit {}, {}/{} B)",
                        r.n_complete, r.n, t.exit_code, t.bytes, t.want_bytes
                    )
                };
                let jpg = match r.client_j_per_gb_est {
                    Some(v) if v != 0.0 => format!("{v:.1}"),
                    _ => "-".into(),
                };
                let sysj = opt(r.system_energy_j_est, |v| format!("{v:.0}"));
                let rng = if r.n > 1 {
                    format!(" [{:.0}–{:.0}]", r.throughput_range.0, r.throughput_range.1)
                } else {
                    String::new()
                };
                let srv = opt(r.server_cpu_s, |v| format!("{v:.2}"));
                tab.push(vec![
                    r.tool().to_string(),
                    comp,
                    format!("{:.1}", r.wall_s),
                    format!("{:.0}{rng}", r.throughput_mbit),
                    format!("{:.0}", 100.0 * r.throughput_mbit / link),
                    format!("{:.2}", r.client_cpu_s),
                    format!("{:.1}", r.client_energy_j_est),
                    jpg,
                    srv,
                    sysj,
                ]);
            }
            md.extend(lines(&tab));
            md.push(String::new());
        }
        md.extend(self.tls_cost());
        md.extend(self.goals());
        let eett = self.eett();
        if !eett.is_empty() {
            md.push("### EETT (wattio transfer --sla target:RATE), mixed dataset".into());
            md.push(String::new());
            let mut t = table(&[
                ("server", 'L'),
                ("target % of link", 'R'),
                ("target Mbit/s", 'R'),
                ("achieved Mbit/s [range]", 'R'),
                ("error (median)", 'R'),
                ("worst error", 'R'),
                ("complete", 'L'),
                ("client J (est.)", 'R'),
            ]);
            for r in eett {
                let target = r.target() as f64;
                let err = |v: f64| 100.0 * (v / target - 1.0);
                let (lo, hi) = r.throughput_range;
                let worst = if err(hi).abs() > err(lo).abs() {
                    err(hi)
                } else {
                    err(lo)
                };
                t.push(vec![
                    eett_variant(r.tool()).to_string(),
                    format!("{:.0} %", 100.0 * target / link),
                    r.target().to_string(),
                    format!("{:.0} [{lo:.0}–{hi:.0}]", r.throughput_mbit),
                    format!("{:+.1} %", err(r.throughput_mbit)),
                    format!("{worst:+.1} %"),
                    format!("{}/{}", r.n_complete, r.n),
                    format!("{:.0}", r.client_energy_j_est),
                ]);
            }
            md.extend(lines(&t));
            md.push(String::new());
        }
        md.join("\n") + "\n"
    }

    /// Plain against HTTPS on the same nginx, per tool and dataset: client and server CPU
    /// seconds per GB and the client's estimated J per GB.
    fn tls_cost(&self) -> Vec<String> {
        let mut t = table(&[
            ("dataset", 'L'),
            ("tool", 'L'),
            ("client CPU s/GB plain", 'R'),
            ("HTTPS", 'R'),
            ("Δ", 'R'),
            ("client J/GB (est.) plain", 'R'),
            ("HTTPS", 'R'),
            ("Δ", 'R'),
            ("nginx CPU s/GB plain", 'R'),
            ("HTTPS", 'R'),
            ("Δ", 'R'),
            ("Mbit/s plain / HTTPS", 'R'),
        ]);
        for d in self.datasets() {
            for (plain, tls) in TLS_PAIRS {
                let (Some(a), Some(b)) = (self.cell(d, plain), self.cell(d, tls)) else {
                    continue;
                };
                if !a.complete || !b.complete {
                    continue;
                }
                let f2 = |v: Option<f64>| opt(v, |v| format!("{v:.2}"));
                let f1 = |v: Option<f64>| opt(v, |v| format!("{v:.1}"));
                let diff = |x: Option<f64>, y: Option<f64>| Some(y? - x?);
                let dj = diff(a.client_j_per_gb_est, b.client_j_per_gb_est);
                let dcpu = diff(a.client_cpu_s_per_gb, b.client_cpu_s_per_gb);
                let dsrv = diff(a.server_cpu_s_per_gb, b.server_cpu_s_per_gb);
                t.push(vec![
                    d.to_string(),
                    plain.to_string(),
                    f2(a.client_cpu_s_per_gb),
                    f2(b.client_cpu_s_per_gb),
                    opt(dcpu, |v| format!("{v:+.2}")),
                    f1(a.client_j_per_gb_est),
                    f1(b.client_j_per_gb_est),
                    opt(dj, |v| format!("{v:+.1}")),
                    f2(a.server_cpu_s_per_gb),
                    f2(b.server_cpu_s_per_gb),
                    opt(dsrv, |v| format!("{v:+.2}")),
                    format!("{:.0} / {:.0}", a.throughput_mbit, b.throughput_mbit),
                ]);
            }
        }
        if t.is_empty() {
            return Vec::new();
        }
        let mut out = vec![
            "### What TLS costs: the same tool, plain HTTP and HTTPS from the same nginx".into(),
            String::new(),
            "CPU seconds per GB moved (medians); J/GB is the client's ESTIMATED energy (it charges idle \
             power over the wall time too, so a slower run costs more whatever its CPU)."
                .into(),
            String::new(),
        ];
        out.extend(lines(&t));
        out.push(String::new());
        out
    }

    /// The goals on the HTTPS rows: ME the least J/GB of all HTTPS tools, EEMT at or
    /// above the best other HTTPS tool's throughput, EETT within ±10 % of its target. wattio
    /// walking nginx's index first; then, when the bench ran them, wattio handed the same URL
    /// list as the other tools (`-i`, the `-tls-list` rows), which discovers nothing.
    fn goals(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(mut t) = self.goal_table("wattio-me-tls", "wattio-eemt-tls") {
            for row in self.eett_goal_rows() {
                t.push(row);
            }
            out.push("### Goals on the HTTPS rows (nginx over TLS, no wattio server)".into());
            out.push(String::new());
            out.extend(lines(&t));
            out.push(String::new());
        }
        if let Some(t) = self.goal_table("wattio-me-tls-list", "wattio-eemt-tls-list") {
            out.push(
                "### Goals on the HTTPS rows, wattio given the same URL list as the other tools (-i)"
                    .into(),
            );
            out.push(String::new());
            out.extend(lines(&t));
            out.push(String::new());
        }
        out
    }

    /// The goal table's EETT rows: each HTTPS EETT target, achieved, within ±10 %?
    fn eett_goal_rows(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut eett: Vec<&BenchCell> = self
            .cells
            .iter()
            .filter(|c| c.tool().starts_with("wattio-eett-tls"))
            .collect();
        eett.sort_by_key(|c| std::cmp::Reverse(c.target()));
        for r in eett {
            let target = r.target() as f64;
            let err = 100.0 * (r.throughput_mbit / target - 1.0);
            out.push(vec![
                format!("EETT {:.0} % (mixed)", 100.0 * target / self.link_mbit),
                format!("target {} Mbit/s", r.target()),
                String::new(),
                String::new(),
                format!("achieved {:.0}", r.throughput_mbit),
                format!("{err:+.1} %"),
                format!(
                    "{} (±10 %)",
                    if err.abs() <= 100.0 * EETT_TOLERANCE {
                        "yes"
                    } else {
                        "NO"
                    }
                ),
            ]);
        }
        out
    }

    /// One goal table: per dataset where both `me` and `eemt` completed, whether `me` has the
    /// least J/GB among them and the other tools' HTTPS rows, and whether `eemt` is at or above
    /// the best other tool's throughput; `None` when neither ran.
    fn goal_table(&self, me: &str, eemt: &str) -> Option<Table> {
        let candidates: Vec<&BenchCell> = self
            .base()
            .into_iter()
            .filter(|c| {
                let t = c.tool();
                t == me || t == eemt || (t.ends_with("-tls") && !t.starts_with("wattio-"))
            })
            .collect();
        if !candidates
            .iter()
            .any(|c| c.tool() == me || c.tool() == eemt)
        {
            return None;
        }
        let mut out = table(&[
            ("dataset", 'L'),
            ("least J/GB (est.): tool", 'L'),
            ("ME J/GB", 'R'),
            ("ME least?", 'L'),
            ("best other Mbit/s: tool", 'L'),
            ("EEMT Mbit/s", 'R'),
            ("EEMT ≥ best?", 'L'),
        ]);
        let jpg = |c: &BenchCell| c.client_j_per_gb_est.unwrap_or(f64::INFINITY);
        for d in self.datasets() {
            let rows: Vec<&BenchCell> = candidates
                .iter()
                .copied()
                .filter(|c| c.dataset() == d && c.complete)
                .collect();
            let me = rows.iter().find(|c| c.tool() == me);
            let eemt = rows.iter().find(|c| c.tool() == eemt);
            let (Some(me), Some(eemt)) = (me, eemt) else {
                continue;
            };
            let Some(least) = first_min_by(&rows, jpg) else {
                continue;
            };
            let others: Vec<&BenchCell> = rows
                .iter()
                .copied()
                .filter(|c| !c.tool().starts_with("wattio-"))
                .collect();
            let best = first_max_by(&others, |c| c.throughput_mbit);
            let best_txt = best.map_or("-".to_string(), |b| {
                format!("{:.0}: {}", b.throughput_mbit, b.tool())
            });
            let eemt_ok = best.is_none_or(|b| eemt.throughput_mbit >= b.throughput_mbit);
            out.push(vec![
                d.to_string(),
                format!("{:.1}: {}", jpg(least), least.tool()),
                format!("{:.1}", jpg(me)),
                if least.tool() == me.tool() {
                    "yes"
                } else {
                    "NO"
                }
                .to_string(),
                best_txt,
                format!("{:.0}", eemt.throughput_mbit),
                if eemt_ok { "yes" } else { "NO" }.to_string(),
            ]);
        }
        Some(out)
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}
