//! The markdown tables of a bench: per dataset, what TLS costs, the goals, EETT.

use super::cells::{eett_variant, first_max_by, first_min_by, tool_key};
use super::{BenchCell, BenchTransfer, EETT_TOLERANCE, TLS_PAIRS};

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
            md.push("| tool | complete | time s | Mbit/s [range] | % link | client CPU s | client J (est.) | J/GB (est.) | nginx CPU s | system J (est.) |".into());
            md.push("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|".into());
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
                md.push(format!(
                    "| {} | {comp} | {:.1} | {:.0}{rng} | {:.0} | {:.2} | {:.1} | {jpg} | {srv} | {sysj} |",
                    r.tool(),
                    r.wall_s,
                    r.throughput_mbit,
                    100.0 * r.throughput_mbit / link,
                    r.client_cpu_s,
                    r.client_energy_j_est
                ));
            }
            md.push(String::new());
        }
        md.extend(self.tls_cost());
        md.extend(self.goals());
        let eett = self.eett();
        if !eett.is_empty() {
            md.push("### EETT (wattio transfer --sla target:RATE), mixed dataset".into());
            md.push(String::new());
            md.push("| server | target % of link | target Mbit/s | achieved Mbit/s [range] | error (median) | worst error | complete | client J (est.) |".into());
            md.push("|---|---:|---:|---:|---:|---:|---|---:|".into());
            for r in eett {
                let target = r.target() as f64;
                let err = |v: f64| 100.0 * (v / target - 1.0);
                let (lo, hi) = r.throughput_range;
                let worst = if err(hi).abs() > err(lo).abs() {
                    err(hi)
                } else {
                    err(lo)
                };
                md.push(format!(
                    "| {} | {:.0} % | {} | {:.0} [{lo:.0}–{hi:.0}] | {:+.1} % | {worst:+.1} % | {}/{} | {:.0} |",
                    eett_variant(r.tool()),
                    100.0 * target / link,
                    r.target(),
                    r.throughput_mbit,
                    err(r.throughput_mbit),
                    r.n_complete,
                    r.n,
                    r.client_energy_j_est
                ));
            }
            md.push(String::new());
        }
        md.join("\n") + "\n"
    }

    /// Plain against HTTPS on the same nginx, per tool and dataset: client and server CPU
    /// seconds per GB and the client's estimated J per GB.
    fn tls_cost(&self) -> Vec<String> {
        let mut rows = Vec::new();
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
                rows.push(format!(
                    "| {d} | {plain} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} / {:.0} |",
                    f2(a.client_cpu_s_per_gb),
                    f2(b.client_cpu_s_per_gb),
                    opt(dcpu, |v| format!("{v:+.2}")),
                    f1(a.client_j_per_gb_est),
                    f1(b.client_j_per_gb_est),
                    opt(dj, |v| format!("{v:+.1}")),
                    f2(a.server_cpu_s_per_gb),
                    f2(b.server_cpu_s_per_gb),
                    opt(dsrv, |v| format!("{v:+.2}")),
                    a.throughput_mbit,
                    b.throughput_mbit
                ));
            }
        }
        if rows.is_empty() {
            return rows;
        }
        let mut out = vec![
            "### What TLS costs: the same tool, plain HTTP and HTTPS from the same nginx".into(),
            String::new(),
            "CPU seconds per GB moved (medians); J/GB is the client's ESTIMATED energy (it charges idle \
             power over the wall time too, so a slower run costs more whatever its CPU)."
                .into(),
            String::new(),
            "| dataset | tool | client CPU s/GB plain | HTTPS | Δ | client J/GB (est.) plain | HTTPS | Δ | \
             nginx CPU s/GB plain | HTTPS | Δ | Mbit/s plain / HTTPS |"
                .into(),
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
        ];
        out.extend(rows);
        out.push(String::new());
        out
    }

    /// The goals on the HTTPS rows: ME the least J/GB of all HTTPS tools, EEMT at or
    /// above the best other HTTPS tool's throughput, EETT within ±10 % of its target. wattio
    /// walking nginx's index first; then, when the bench ran them, wattio handed the same URL
    /// list as the other tools (`-i`, the `-tls-list` rows), which discovers nothing.
    fn goals(&self) -> Vec<String> {
        let mut out = self.goal_table(
            "### Goals on the HTTPS rows (nginx over TLS, no wattio server)",
            "wattio-me-tls",
            "wattio-eemt-tls",
        );
        if !out.is_empty() {
            out.extend(self.eett_goal_rows());
            out.push(String::new());
        }
        let list = self.goal_table(
            "### Goals on the HTTPS rows, wattio given the same URL list as the other tools (-i)",
            "wattio-me-tls-list",
            "wattio-eemt-tls-list",
        );
        if !list.is_empty() {
            out.extend(list);
            out.push(String::new());
        }
        out
    }

    /// The goal table's EETT lines: each HTTPS EETT target, achieved, within ±10 %?
    fn eett_goal_rows(&self) -> Vec<String> {
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
            out.push(format!(
                "| EETT {:.0} % (mixed) | target {} Mbit/s | | | achieved {:.0} | {err:+.1} % | {} (±10 %) |",
                100.0 * target / self.link_mbit,
                r.target(),
                r.throughput_mbit,
                if err.abs() <= 100.0 * EETT_TOLERANCE { "yes" } else { "NO" }
            ));
        }
        out
    }

    /// One goal table: per dataset where both `me` and `eemt` completed, whether `me` has the
    /// least J/GB among them and the other tools' HTTPS rows, and whether `eemt` is at or above
    /// the best other tool's throughput; no lines when neither ran.
    fn goal_table(&self, title: &str, me: &str, eemt: &str) -> Vec<String> {
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
            return Vec::new();
        }
        let mut out: Vec<String> = vec![
            title.into(),
            String::new(),
            "| dataset | least J/GB (est.): tool | ME J/GB | ME least? | best other Mbit/s: tool | EEMT Mbit/s | EEMT ≥ best? |".into(),
            "|---|---|---:|---|---|---:|---|".into(),
        ];
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
            out.push(format!(
                "| {d} | {:.1}: {} | {:.1} | {} | {best_txt} | {:.0} | {} |",
                jpg(least),
                least.tool(),
                jpg(me),
                if least.tool() == me.tool() {
                    "yes"
                } else {
                    "NO"
                },
                eemt.throughput_mbit,
                if eemt_ok { "yes" } else { "NO" }
            ));
        }
        out
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}
