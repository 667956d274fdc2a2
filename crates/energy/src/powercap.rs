//! RAPL through the powercap sysfs tree (`/sys/class/powercap/intel-rapl*`).

use crate::error::EnergyError;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The fix printed when `energy_uj` cannot be read.
pub(crate) const PERMISSION_FIX: &str = "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694): run as root, or grant read access with `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj` (a udev rule keeps it across reboots)";

/// One zone found in the powercap tree.
#[derive(Debug, Clone, PartialEq)]
pub struct PowercapZone {
    /// Directory of the zone, e.g. `/sys/class/powercap/intel-rapl:0:1` (under the root).
    pub dir: PathBuf,
    /// `intel-rapl:0:1`.
    pub id: String,
    /// The content of the `name` file.
    pub name: String,
    pub socket: u32,
    pub domain: Domain,
    /// Raw `max_energy_range_uj`, or why it could not be used.
    pub max_uj: Result<u64, String>,
    /// From `intel-rapl-mmio`.
    pub mmio: bool,
}

/// Everything found under `/sys/class/powercap`: usable zones and zones skipped, with reasons.
#[derive(Debug, Default)]
pub struct PowercapDiscovery {
    pub zones: Vec<PowercapZone>,
    /// Human-readable notes: zones skipped (duplicates, unknown names) and why.
    pub notes: Vec<String>,
}

fn parse_zone_id(id: &str) -> Option<(bool, Vec<u32>)> {
    let (mmio, rest) = if let Some(r) = id.strip_prefix("intel-rapl-mmio:") {
        (true, r)
    } else if let Some(r) = id.strip_prefix("intel-rapl:") {
        (false, r)
    } else {
        return None;
    };
    let nums: Option<Vec<u32>> = rest.split(':').map(|n| n.parse().ok()).collect();
    nums.filter(|n| !n.is_empty() && n.len() <= 2)
        .map(|n| (mmio, n))
}

/// Socket and domain from a zone's `name`; `parent_socket` for sub-zones.
fn classify(name: &str, parent_socket: Option<u32>) -> Option<(u32, Domain)> {
    if let Some(rest) = name.strip_prefix("package-") {
        // `package-N` or `package-N-die-M` (multi-die parts): the socket is N.
        let n = rest.split('-').next()?.parse().ok()?;
        return Some((n, Domain::Package));
    }
    let domain = match name {
        "core" => Domain::Core,
        "uncore" => Domain::Uncore,
        "dram" => Domain::Dram,
        "psys" => Domain::Psys,
        _ => return None,
    };
    Some((parent_socket.unwrap_or(0), domain))
}

fn read_trimmed(path: &Path) -> Result<String, std::io::Error> {
    fs::read_to_string(path).map(|s| s.trim().to_string())
}

/// Walks `/sys/class/powercap` under `root`.
///
/// Fails only when the directory itself is missing or unreadable; individual zones that cannot be
/// classified are reported in [`PowercapDiscovery::notes`].
pub fn discover_powercap(root: &SysRoot) -> Result<PowercapDiscovery, EnergyError> {
    let base = root.path("/sys/class/powercap");
    let entries = fs::read_dir(&base).map_err(|e| {
        EnergyError::from_io(
            &base,
            e,
            "no powercap tree: load the intel_rapl_msr module (AMD needs Linux 5.11+), or use another mechanism",
        )
    })?;
    let mut ids: Vec<(String, bool, Vec<u32>)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            parse_zone_id(&id).map(|(mmio, nums)| (id, mmio, nums))
        })
        .collect();
    // Parents before children, intel-rapl before intel-rapl-mmio.
    ids.sort_by(|a, b| (a.1, a.2.len(), &a.2).cmp(&(b.1, b.2.len(), &b.2)));

    let mut disc = PowercapDiscovery::default();
    let mut parent_sockets: Vec<((bool, u32), u32)> = Vec::new();
    for (id, mmio, nums) in ids {
        let dir = base.join(&id);
        let name = match read_trimmed(&dir.join("name")) {
            Ok(n) => n,
            Err(e) => {
                disc.notes
                    .push(format!("{id}: skipped, cannot read its name file ({e})"));
                continue;
            }
        };
        let parent = if nums.len() == 2 {
            parent_sockets
                .iter()
                .find(|(k, _)| *k == (mmio, nums[0]))
                .map(|(_, s)| *s)
        } else {
            None
        };
        let Some((socket, domain)) = classify(&name, parent) else {
            disc.notes
                .push(format!("{id}: skipped, unknown zone name '{name}'"));
            continue;
        };
        if nums.len() == 1 {
            parent_sockets.push(((mmio, nums[0]), socket));
        }
        if disc
            .zones
            .iter()
            .any(|z| z.socket == socket && z.domain == domain && z.mmio != mmio)
        {
            disc.notes.push(format!(
                "{id}: skipped, {domain} of socket {socket} is already read through intel-rapl"
            ));
            continue;
        }
        let max_path = dir.join("max_energy_range_uj");
        let max_uj = match read_trimmed(&max_path) {
            Ok(s) => s.parse::<u64>().map_err(|_| {
                format!(
                    "{}: malformed content {s:?} (expected microjoules)",
                    max_path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(format!("{}: missing", max_path.display()))
            }
            Err(e) => Err(format!("{}: {e}", max_path.display())),
        };
        disc.zones.push(PowercapZone {
            dir,
            id,
            name,
            socket,
            domain,
            max_uj,
            mmio,
        });
    }
    disc.zones.sort_by_key(|z| (z.socket, z.domain));
    Ok(disc)
}

/// Reads the powercap zones it was opened on.
///
/// RAPL through the powercap sysfs tree (`/sys/class/powercap/intel-rapl*`).
///
/// Zones are named by their `name` file (`package-N`, `core`, `uncore`, `dram`, `psys`), never by
/// their number: `intel-rapl:1` is `psys` on a laptop and `package-1` on a two-socket server.
/// `energy_uj` counts microjoules up to `max_energy_range_uj` and wraps; the files stay open and
/// are re-read with `pread` at offset 0 (no reopen per sample). AMD registers the same
/// `intel-rapl` control type; client SoCs may add `intel-rapl-mmio` zones, which are skipped when
/// an `intel-rapl` zone already covers the same socket and domain.
pub struct PowercapSource {
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    files: Vec<(PathBuf, File)>,
    buf: Vec<u8>,
}

impl PowercapSource {
    /// Opens the `energy_uj` file of every zone in `zones` and reads it once to check it.
    pub fn open(zones: &[PowercapZone]) -> Result<Self, EnergyError> {
        if zones.is_empty() {
            return Err(EnergyError::Unusable {
                mechanism: Mechanism::Powercap,
                reason: "no RAPL zone under /sys/class/powercap".into(),
                fix: "load intel_rapl_msr, or use another mechanism".into(),
            });
        }
        let mut specs = Vec::with_capacity(zones.len());
        let mut files = Vec::with_capacity(zones.len());
        for z in zones {
            let path = z.dir.join("energy_uj");
            let file =
                File::open(&path).map_err(|e| EnergyError::from_io(&path, e, PERMISSION_FIX))?;
            specs.push(CounterSpec {
                socket: z.socket,
                domain: z.domain,
                unit_j: 1e-6,
                wrap: match z.max_uj {
                    Ok(m) => Wrap::AtMax(m),
                    Err(_) => Wrap::Unknown,
                },
                origin: path.display().to_string(),
            });
            files.push((path, file));
        }
        let mut src = PowercapSource {
            provenance: Provenance::measured(Mechanism::Powercap),
            specs,
            files,
            buf: vec![0; 32],
        };
        let mut probe = vec![0; zones.len()];
        src.read_raw(&mut probe)?;
        Ok(src)
    }
}

/// Parses the decimal content of an `energy_uj` file.
pub(crate) fn parse_uj(bytes: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(bytes).ok()?.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl Source for PowercapSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        for (i, (path, file)) in self.files.iter().enumerate() {
            let n = file
                .read_at(&mut self.buf, 0)
                .map_err(|e| EnergyError::from_io(path, e, PERMISSION_FIX))?;
            out[i] = parse_uj(&self.buf[..n]).ok_or_else(|| EnergyError::Malformed {
                path: path.clone(),
                content: String::from_utf8_lossy(&self.buf[..n]).trim().to_string(),
                expected: "a decimal number of microjoules".into(),
                fix: "this is not a RAPL energy_uj file; check WATTIO_ROOT or use another --source"
                    .into(),
            })?;
        }
        Ok(())
    }
}

/// The powercap sysfs tree.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    match crate::powercap::discover_powercap(req.root) {
        Ok(d) => {
            let mut notes = d.notes.clone();
            for z in &d.zones {
                if let Err(why) = &z.max_uj {
                    notes.push(format!("{}: max_energy_range_uj unusable ({why})", z.id));
                }
            }
            let r = crate::powercap::PowercapSource::open(&d.zones)
                .map(|s| Box::new(s) as Box<dyn crate::Source>);
            (
                r.and_then(crate::opening::check_alive)
                    .and_then(|s| crate::opening::filter(s, req.domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_ids() {
        assert_eq!(parse_zone_id("intel-rapl:0"), Some((false, vec![0])));
        assert_eq!(parse_zone_id("intel-rapl:1:2"), Some((false, vec![1, 2])));
        assert_eq!(parse_zone_id("intel-rapl-mmio:0"), Some((true, vec![0])));
        assert_eq!(parse_zone_id("intel-rapl"), None);
        assert_eq!(parse_zone_id("intel-rapl:a"), None);
        assert_eq!(parse_zone_id("dtpm"), None);
    }

    #[test]
    fn names_decide_socket_and_domain() {
        assert_eq!(classify("package-1", None), Some((1, Domain::Package)));
        assert_eq!(
            classify("package-0-die-1", None),
            Some((0, Domain::Package))
        );
        assert_eq!(classify("dram", Some(1)), Some((1, Domain::Dram)));
        assert_eq!(classify("psys", None), Some((0, Domain::Psys)));
        assert_eq!(classify("banana", None), None);
    }

    #[test]
    fn energy_uj_parsing_rejects_garbage() {
        assert_eq!(parse_uj(b"123456\n"), Some(123456));
        assert_eq!(parse_uj(b"-5\n"), None);
        assert_eq!(parse_uj(b"12a"), None);
        assert_eq!(parse_uj(b""), None);
    }
}
