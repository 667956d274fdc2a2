//! Each network interface's energy interval over a window: one row per interface with its link
//! state and speed, its bytes, and, for a physical NIC whose driver and speed the shipped NIC
//! table covers, `[idle W × window, max W × window]`. No per-process split: a NIC's power
//! follows its link and PHY state far more than its bytes. The link is read at the window's two
//! ends; a link that changed in between gets the widest interval of the two states.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::figures::EnergyInterval;
use crate::nic::{network_interfaces, NetworkInterface};

/// The interfaces as read at one instant.
#[derive(Debug, Clone)]
pub struct NicMark {
    at: Instant,
    interfaces: Vec<NetworkInterface>,
}

impl NicMark {
    /// Reads every interface under `root` now (none where `/sys/class/net` cannot be read).
    pub fn read(root: &SysRoot) -> NicMark {
        NicMark {
            at: Instant::now(),
            interfaces: network_interfaces(root).unwrap_or_default(),
        }
    }
}

/// One interface over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicEnergyRow {
    /// The interface (`eth0`).
    pub interface: String,
    /// Its driver, where it has a device.
    pub driver: Option<String>,
    /// `operstate` at the window's end (`up`, `down`, …).
    pub operstate: String,
    /// Link speed at the window's end, Mb/s.
    pub speed_mbps: Option<u32>,
    /// The window, s.
    pub window_s: f64,
    /// Bytes received and sent over the window.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// The estimated interval, where the NIC table covers the driver at that speed.
    pub interval: Option<EnergyInterval>,
    /// What the interval is: `estimated (NIC profile …)`.
    pub label: Option<String>,
    /// Why there is no interval.
    pub reason: Option<String>,
}

impl NicEnergyRow {
    /// Whether the interface has energy of its own (not a virtual or software one).
    pub fn is_physical(&self) -> bool {
        self.reason.as_deref().is_none_or(|r| {
            !r.contains("no energy of its own") && !r.contains("belongs to the host")
        })
    }
}

/// The interval of one interface at one end: its figures at the speed then, if up.
fn watts_at(i: &NetworkInterface) -> Result<(f64, f64, String), String> {
    if let Some(r) = &i.virtual_reason {
        return Err(r.clone());
    }
    if i.operstate != "up" {
        return Err(format!(
            "link {}: the NIC table gives figures per link speed only",
            i.operstate
        ));
    }
    let driver = i.driver.as_deref().unwrap_or("unknown");
    let speed = i
        .speed_mbps
        .map_or("unknown".into(), |s| format!("{s} Mb/s"));
    let f = i
        .figures
        .as_ref()
        .ok_or_else(|| format!("no shipped NIC figures for driver {driver} at {speed}"))?;
    Ok((
        f.idle_w.unwrap_or(0.0),
        f.max_w,
        format!("{} at {speed}, {}", f.description, f.source),
    ))
}

/// Each interface present at both marks, over the window between them.
pub fn nic_rows_between(a: &NicMark, b: &NicMark) -> Vec<NicEnergyRow> {
    let window_s = b.at.saturating_duration_since(a.at).as_secs_f64();
    b.interfaces
        .iter()
        .filter_map(|end| {
            let start = a.interfaces.iter().find(|i| i.name == end.name)?;
            let grown =
                |x: Option<u64>, y: Option<u64>| y.unwrap_or(0).saturating_sub(x.unwrap_or(0));
            let (interval, label, reason) = match (watts_at(start), watts_at(end)) {
                (Ok((lo0, hi0, l0)), Ok((lo1, hi1, l1))) => {
                    let changed = if l0 == l1 {
                        ""
                    } else {
                        "; the link changed in the window, the widest bounds of both states"
                    };
                    (
                        Some(EnergyInterval {
                            lower_j: lo0.min(lo1) * window_s,
                            central_j: None,
                            upper_j: hi0.max(hi1) * window_s,
                        }),
                        Some(format!(
                            "estimated (NIC profile: {l1}; link read at the window's ends{changed})"
                        )),
                        None,
                    )
                }
                (_, Err(r)) | (Err(r), _) => (None, None, Some(r)),
            };
            Some(NicEnergyRow {
                interface: end.name.clone(),
                driver: end.driver.clone(),
                operstate: end.operstate.clone(),
                speed_mbps: end.speed_mbps,
                window_s,
                rx_bytes: grown(start.rx_bytes, end.rx_bytes),
                tx_bytes: grown(start.tx_bytes, end.tx_bytes),
                interval,
                label,
                reason,
            })
        })
        .collect()
}

/// The rows as text: one line per physical NIC, and one line naming the interfaces that have
/// no energy of their own.
pub fn nic_lines(rows: &[NicEnergyRow]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut others = Vec::new();
    for r in rows {
        if !r.is_physical() {
            others.push(r.interface.as_str());
            continue;
        }
        let link = match r.speed_mbps {
            Some(s) => format!("{} {s} Mb/s", r.operstate),
            None => r.operstate.clone(),
        };
        let what = match (&r.interval, &r.label, &r.reason) {
            (Some(i), Some(l), _) => format!("{}   {l}", i.display()),
            (_, _, Some(why)) => format!("no interval: {why}"),
            _ => "no interval".into(),
        };
        lines.push(format!(
            "nic {} ({link}) rx {} B tx {} B over {:.2} s   {what}",
            r.interface, r.rx_bytes, r.tx_bytes, r.window_s
        ));
    }
    if !others.is_empty() {
        lines.push(format!(
            "nic {}: virtual or software, no energy of their own",
            others.join(", ")
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn write(base: &Path, rel: &str, text: &str) {
        let p = base.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn nic(base: &Path, name: &str, driver: &str, state: &str, speed: &str, rx: u64) {
        let dir = format!("sys/class/net/{name}");
        write(base, &format!("{dir}/operstate"), state);
        write(base, &format!("{dir}/speed"), speed);
        write(base, &format!("{dir}/statistics/rx_bytes"), &rx.to_string());
        write(base, &format!("{dir}/statistics/tx_bytes"), "0");
        let drv = base.join("drivers").join(driver);
        std::fs::create_dir_all(&drv).unwrap();
        std::fs::create_dir_all(base.join(&dir).join("device")).unwrap();
        let link = base.join(&dir).join("device/driver");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&drv, link).unwrap();
    }

    #[test]
    fn a_covered_nic_gets_its_table_interval_and_others_say_why() {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        nic(b, "eth0", "e100", "up", "100", 1000);
        nic(b, "eth1", "igb", "up", "1000", 0);
        nic(b, "eth2", "e100", "down", "-1", 0);
        write(b, "sys/class/net/lo/operstate", "unknown");
        let root = SysRoot::new(b);
        let mut a = NicMark::read(&root);
        a.at -= Duration::from_secs(10);
        nic(b, "eth0", "e100", "up", "100", 6000);
        let rows = nic_rows_between(&a, &NicMark::read(&root));
        let row = |n: &str| rows.iter().find(|r| r.interface == n).unwrap();
        let e = row("eth0");
        assert_eq!(e.rx_bytes, 5000);
        // The 8255x table entry: at most 0.58 W, no idle figure (lower bound 0), over ~10 s.
        let i = e.interval.unwrap();
        assert_eq!(i.lower_j, 0.0);
        assert!((i.upper_j - 0.58 * e.window_s).abs() < 1e-9 && e.window_s >= 10.0);
        assert!(e
            .label
            .as_deref()
            .unwrap()
            .starts_with("estimated (NIC profile"));
        assert!(row("eth1")
            .reason
            .as_deref()
            .unwrap()
            .contains("igb at 1000 Mb/s"));
        assert!(row("eth2")
            .reason
            .as_deref()
            .unwrap()
            .starts_with("link down"));
        assert!(!row("lo").is_physical());
        let text = nic_lines(&rows);
        assert_eq!(
            text.last().unwrap(),
            "nic lo: virtual or software, no energy of their own"
        );
        assert!(
            text[0].starts_with("nic eth0 (up 100 Mb/s) rx 5000 B"),
            "{text:?}"
        );
    }
}
