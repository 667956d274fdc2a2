//! What `wattio probe` shows of the I/O devices: each block device's power data as the device
//! reports it (or its profile), and each network interface. A device that cannot be read
//! gives a one-line reason in its row; nothing here fails the probe.

use std::fmt::Write as _;

use serde::Serialize;
use wattio_energy::SysRoot;

use crate::ata;
use crate::figures::PowerFigures;
use crate::inventory::{storage_devices, StorageDevice, StorageKind};
use crate::nic::{network_interfaces, NetworkInterface};
use crate::nvme::{ApstTable, NvmeStateReader};
use crate::readers::open_reader;
use crate::runtime_pm::{storage_runtime_pm, RuntimePm};
use crate::state::PowerStateReader;

/// One block device as the probe shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StorageProbe {
    /// The device, as the inventory lists it.
    pub device: StorageDevice,
    /// Its model: the NVMe Identify model number where read, else sysfs's.
    pub model: Option<String>,
    /// Its power states and their source, where known.
    pub figures: Option<PowerFigures>,
    /// The state it is in now (`ps3`, `standby`), where it says.
    pub current_state: Option<String>,
    /// NVMe: the APST setting.
    pub apst: Option<ApstTable>,
    /// SATA/SCSI: the host's link power management policy.
    pub link_power_policy: Option<String>,
    /// Runtime-PM residency of the device and its controller.
    pub runtime_pm: Vec<RuntimePm>,
    /// Why something could not be read, one line each.
    pub problems: Vec<String>,
}

/// The devices section of the probe report.
#[derive(Debug, Clone, Serialize)]
pub struct DevicesProbe {
    /// Block devices.
    pub storage: Vec<StorageProbe>,
    /// Why the block devices could not be listed.
    pub storage_error: Option<String>,
    /// Network interfaces.
    pub network_interfaces: Vec<NetworkInterface>,
    /// Why the interfaces could not be listed.
    pub network_error: Option<String>,
}

fn probe_nvme(root: &SysRoot, controller: &str, row: &mut StorageProbe) {
    let mut reader = match NvmeStateReader::open(root, controller) {
        Ok(r) => r,
        Err(e) => return row.problems.push(e.to_string()),
    };
    row.model = Some(reader.model().to_string())
        .filter(|m| !m.is_empty())
        .or(row.model.take());
    if !reader.apst_supported() {
        row.problems.push(format!(
            "{controller}: no APST (Identify APSTA = 0): the drive changes power state only when told"
        ));
    } else {
        match reader.controller().apst() {
            Ok(a) => row.apst = Some(a),
            Err(e) => row.problems.push(e.to_string()),
        }
    }
    match reader.current_state() {
        Ok(s) => row.current_state = s.map(|i| reader.figures().states[i].name.clone()),
        Err(e) => row.problems.push(e.to_string()),
    }
    row.figures = Some(reader.figures().clone());
}

fn probe_scsi(root: &SysRoot, dev: &StorageDevice, host: Option<&str>, row: &mut StorageProbe) {
    row.link_power_policy = host.and_then(|h| ata::link_power_policy(root, h));
    match open_reader(root, dev) {
        Ok(Some(r)) => row.figures = Some(r.figures().clone()),
        Ok(None) => row.problems.push(format!(
            "no shipped profile describes model {}: no power figures (profiles ship only figures with a datasheet source)",
            dev.model.as_deref().unwrap_or("(none)")
        )),
        Err(e) => row.problems.push(e.to_string()),
    }
    if matches!(dev.kind, StorageKind::Ata { .. }) {
        match ata::check_power_mode(root, &dev.name) {
            Ok(mode) => row.current_state = Some(mode.describe()),
            Err(e) => row.problems.push(e.to_string()),
        }
    }
}

/// One block device's row.
pub fn probe_storage_device(root: &SysRoot, dev: &StorageDevice) -> StorageProbe {
    let mut row = StorageProbe {
        device: dev.clone(),
        model: dev.model.clone(),
        figures: None,
        current_state: None,
        apst: None,
        link_power_policy: None,
        runtime_pm: storage_runtime_pm(root, dev),
        problems: Vec::new(),
    };
    match &dev.kind {
        StorageKind::Nvme { controller } => probe_nvme(root, controller, &mut row),
        StorageKind::Ata { host } | StorageKind::Scsi { host } => {
            probe_scsi(root, dev, host.as_deref(), &mut row)
        }
        StorageKind::Virtual { .. } | StorageKind::Other => {}
    }
    row
}

/// The devices section: every block device and network interface under `root`.
pub fn probe_devices(root: &SysRoot) -> DevicesProbe {
    let (storage, storage_error) = match storage_devices(root) {
        Ok(devs) => (
            devs.iter().map(|d| probe_storage_device(root, d)).collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (network_interfaces, network_error) = match network_interfaces(root) {
        Ok(n) => (n, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    DevicesProbe {
        storage,
        storage_error,
        network_interfaces,
        network_error,
    }
}

fn watts(w: Option<f64>) -> String {
    w.map(|w| format!("{w:.4} W"))
        .unwrap_or_else(|| "not reported".into())
}

fn render_storage(s: &mut String, row: &StorageProbe) {
    let d = &row.device;
    let root = if d.holds_root { ", holds /" } else { "" };
    let _ = writeln!(
        s,
        "  {} {}  {}{root}",
        d.name,
        d.kind,
        row.model.as_deref().unwrap_or("(no model)")
    );
    if d.is_virtual() {
        let _ = writeln!(
            s,
            "    no energy of its own: a virtual disk, its energy is the host's"
        );
    }
    if let Some(f) = &row.figures {
        let _ = writeln!(s, "    figures: {}", f.source.label());
        for st in &f.states {
            let _ = writeln!(
                s,
                "    {:<26} max {:.4} W  idle {}  active {}  entry {} µs  exit {} µs{}",
                st.name,
                st.max_w,
                watts(st.idle_w),
                watts(st.active_w),
                st.entry_latency_us,
                st.exit_latency_us,
                if st.non_operational {
                    "  non-operational"
                } else {
                    ""
                }
            );
        }
    }
    if let Some(c) = &row.current_state {
        let _ = writeln!(s, "    current state: {c}");
    }
    if let Some(a) = &row.apst {
        let on = if a.enabled { "on" } else { "off" };
        let _ = writeln!(s, "    APST: {on}; {}", a.summary());
    }
    if let Some(p) = &row.link_power_policy {
        let _ = writeln!(s, "    link power policy: {p}");
    }
    for r in &row.runtime_pm {
        let ms = |v: Option<u64>| v.map(|v| format!("{v} ms")).unwrap_or_else(|| "?".into());
        let _ = writeln!(
            s,
            "    runtime PM {}: {}, active {}, suspended {}",
            r.device_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            r.status,
            ms(r.active_ms),
            ms(r.suspended_ms)
        );
    }
    for p in &row.problems {
        let _ = writeln!(s, "    cannot read: {p}");
    }
}

fn render_nic(s: &mut String, n: &NetworkInterface) {
    let speed = n
        .speed_mbps
        .map(|v| format!("{v} Mb/s"))
        .unwrap_or_else(|| "no link speed".into());
    let driver = n.driver.as_deref().unwrap_or("no driver");
    let _ = writeln!(s, "  {} {}, {speed}, {driver}", n.name, n.operstate);
    let bytes = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        s,
        "    rx {} B, tx {} B",
        bytes(n.rx_bytes),
        bytes(n.tx_bytes)
    );
    match (&n.virtual_reason, &n.figures) {
        (Some(why), _) => {
            let _ = writeln!(s, "    {why}");
        }
        (None, Some(f)) => {
            let _ = writeln!(
                s,
                "    power [{}, {:.2} W] ({})",
                watts(f.idle_w.or(Some(0.0))),
                f.max_w,
                f.source
            );
        }
        (None, None) => {
            let _ = writeln!(
                s,
                "    no power figures: no profile with a source for this driver and speed"
            );
        }
    }
}

impl DevicesProbe {
    /// The human-readable devices section.
    pub fn render(&self) -> String {
        let mut s = String::from("storage (what each device says of its own power):\n");
        if let Some(e) = &self.storage_error {
            let _ = writeln!(s, "  cannot list block devices: {e}");
        }
        for row in &self.storage {
            render_storage(&mut s, row);
        }
        s.push_str("network interfaces:\n");
        if let Some(e) = &self.network_error {
            let _ = writeln!(s, "  cannot list interfaces: {e}");
        }
        for n in &self.network_interfaces {
            render_nic(&mut s, n);
        }
        s
    }
}
