//! Network interfaces from `/sys/class/net` (kernel Documentation/ABI/testing/sysfs-class-net:
//! `operstate`, `speed` in Mb/s with -1 when the link is down, `statistics/{rx,tx}_bytes`),
//! their driver (the `device/driver` link), whether they are virtual (no power of their own:
//! loopback, bridges, veth, tun, and the paravirtual NICs of a guest, whose power is the
//! host's), and the per-speed power interval of a physical NIC from a shipped profile table
//! with sources (`profiles/nics.toml`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::error::DeviceError;
use crate::inventory::read_trimmed;
use crate::profile::line_of;

/// Drivers of NICs whose power belongs to another machine or to nothing: paravirtual guest
/// NICs and software interfaces.
const VIRTUAL_DRIVERS: &[&str] = &[
    "virtio_net",
    "xen-netfront",
    "vif",
    "vmxnet3",
    "hv_netvsc",
    "ena",
    "gve",
    "veth",
    "tun",
    "bridge",
    "dummy",
];

/// The power interval a NIC draws at one link speed, with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicPowerFigures {
    /// The driver the figures are for.
    pub driver: String,
    /// What NIC.
    pub description: String,
    /// The most it draws, W.
    pub max_w: f64,
    /// What it draws with the link idle, W, where the source gives it (else the lower bound is
    /// 0).
    pub idle_w: Option<f64>,
    /// Where the figures come from.
    pub source: String,
}

/// One network interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterface {
    /// Its name (`eth0`).
    pub name: String,
    /// `up`, `down`, `unknown`, … (`operstate`).
    pub operstate: String,
    /// The link speed, Mb/s; `None` when down or not reported (`speed` is -1 or unreadable).
    pub speed_mbps: Option<u32>,
    /// Its driver, where it has a device.
    pub driver: Option<String>,
    /// Bytes received since boot.
    pub rx_bytes: Option<u64>,
    /// Bytes sent since boot.
    pub tx_bytes: Option<u64>,
    /// Why it has no energy of its own, for a virtual interface.
    pub virtual_reason: Option<String>,
    /// Its power figures at the current speed, for a physical NIC the profile table knows.
    pub figures: Option<NicPowerFigures>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NicEntry {
    driver: String,
    description: String,
    speeds_mbps: Vec<u32>,
    max_w: f64,
    idle_w: Option<f64>,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NicTable {
    #[serde(default)]
    nic: Vec<NicEntry>,
}

const NIC_TABLE: &str = include_str!("../profiles/nics.toml");

fn parse_nic_table(file: &str, text: &str) -> Result<Vec<NicEntry>, DeviceError> {
    let table: NicTable = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(1);
        DeviceError::Profile {
            file: file.to_string(),
            line,
            what: e.message().replace('\n', " "),
        }
    })?;
    for e in &table.nic {
        let bad = |w: f64| !(0.0..=100.0).contains(&w);
        if bad(e.max_w) || e.idle_w.is_some_and(|w| bad(w) || w > e.max_w) {
            return Err(DeviceError::Profile {
                file: file.to_string(),
                line: text
                    .find(&format!("\"{}\"", e.driver))
                    .map(|at| line_of(text, at))
                    .unwrap_or(1),
                what: format!("{}: watts out of 0..100 or idle above max", e.driver),
            });
        }
    }
    Ok(table.nic)
}

/// The shipped figures of a NIC with `driver` at `speed_mbps`, if the table has them.
pub fn nic_figures(driver: &str, speed_mbps: u32) -> Result<Option<NicPowerFigures>, DeviceError> {
    Ok(parse_nic_table("nics.toml", NIC_TABLE)?
        .into_iter()
        .find(|e| e.driver == driver && e.speeds_mbps.contains(&speed_mbps))
        .map(|e| NicPowerFigures {
            driver: e.driver,
            description: e.description,
            max_w: e.max_w,
            idle_w: e.idle_w,
            source: e.source,
        }))
}

/// Why interface `name` at `dir` has no energy of its own, or `None` for a physical NIC.
fn virtual_reason(dir: &Path, driver: Option<&str>) -> Option<String> {
    if !dir.join("device").exists() {
        return Some("a software interface (no device): no energy of its own".into());
    }
    let d = driver?;
    VIRTUAL_DRIVERS
        .contains(&d)
        .then(|| format!("a virtual NIC (driver {d}): its energy belongs to the host"))
}

/// The machine's network interfaces, sorted by name.
pub fn network_interfaces(root: &SysRoot) -> Result<Vec<NetworkInterface>, DeviceError> {
    let class = root.path("/sys/class/net");
    let entries = std::fs::read_dir(&class).map_err(|e| DeviceError::io(&class, e))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let dir = class.join(&name);
        let driver = std::fs::read_link(dir.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let speed_mbps = read_trimmed(&dir.join("speed"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|s| u32::try_from(s).ok())
            .filter(|s| *s > 0);
        let counter =
            |f: &str| read_trimmed(&dir.join("statistics").join(f)).and_then(|s| s.parse().ok());
        let virtual_reason = virtual_reason(&dir, driver.as_deref());
        let figures = match (&virtual_reason, &driver, speed_mbps) {
            (None, Some(d), Some(s)) => nic_figures(d, s)?,
            _ => None,
        };
        out.push(NetworkInterface {
            operstate: read_trimmed(&dir.join("operstate")).unwrap_or_else(|| "unknown".into()),
            speed_mbps,
            rx_bytes: counter("rx_bytes"),
            tx_bytes: counter("tx_bytes"),
            virtual_reason,
            figures,
            driver,
            name,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_and_malformed_tables_name_the_line() {
        let f = nic_figures("e100", 100).unwrap().unwrap();
        assert_eq!((f.max_w, f.idle_w), (0.58, None));
        assert!(nic_figures("e100", 1000).unwrap().is_none());
        let e = parse_nic_table("t.toml", "[[nic]]\ndriver = \"x\"\nmax_w = \n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.toml:3:") && !e.contains('\n'), "{e}");
    }
}
