//! A measured command's share of the GPUs' energy: who used each GPU during the run, as NVML
//! reports it ([`wattio_energy::GpuProcessReader`]), kept for the processes of the command's
//! tree, and split by [`attribution::split_gpu`] over the whole run.
//!
//! A thread reads each process's utilisation since its previous read every 500 ms (the driver
//! keeps only a few seconds of samples), adds up each one's busy seconds, and decides once per
//! pid whether it belongs to the command: the command itself, or a
//! process whose chain of parents (`/proc/PID/stat`) reaches it. A process of the command that
//! used a GPU and ended before the next read (under 500 ms) cannot be traced and its use stays
//! outside the command's share.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattio_energy::attribution::{self, cputime, GpuUse, IdlePolicy};
use wattio_energy::{Domain, GpuProcessReader, SysRoot};

/// The command's GPU share of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuShare {
    pub energy_j: f64,
    /// E.g. `measured (nvml), attributed (gpu utilisation share)`.
    pub label: String,
}

/// What the watcher gathered: per GPU, the command's processes' use and everyone's.
#[derive(Default)]
struct Gathered {
    /// Per GPU index: what its processes did over the run.
    uses: BTreeMap<u32, RunUse>,
    /// Per pid: whether it belongs to the command's tree.
    belongs: HashMap<u32, bool>,
}

/// One GPU's use over a run: per pid its busy seconds (utilisation × each read's window) or the
/// most memory it held, and the basis last seen.
#[derive(Default)]
struct RunUse {
    by_pid: HashMap<u32, f64>,
    basis: Option<attribution::GpuShareBasis>,
}

/// Watches the GPUs while a command runs.
pub struct GpuShareWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    gathered: Arc<Mutex<Gathered>>,
}

impl GpuShareWatcher {
    /// Starts reading (before the command is spawned, so its first samples are not missed);
    /// `None` when the meter reads no GPU or NVML cannot say who uses them.
    pub fn open(gpu_indices: &[u32]) -> Option<GpuProcessReader> {
        if gpu_indices.is_empty() {
            return None;
        }
        GpuProcessReader::open(&wattio_energy::nvml_lib_from_env(), gpu_indices).ok()
    }

    /// Follows the command `pid` with `reader` until [`GpuShareWatcher::finish`].
    pub fn start(mut reader: GpuProcessReader, pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let gathered = Arc::new(Mutex::new(Gathered::default()));
        let (s, g) = (stop.clone(), gathered.clone());
        let thread = std::thread::Builder::new()
            .name("wattio-gpu-share".into())
            .spawn(move || {
                let root = SysRoot::new("/");
                loop {
                    let done = s.load(Ordering::Relaxed);
                    let uses = reader.read();
                    gather(
                        &mut g.lock().unwrap_or_else(|p| p.into_inner()),
                        uses,
                        pid,
                        &root,
                    );
                    if done {
                        return;
                    }
                    // Short sleeps, so the end of a run is not held up by the period.
                    for _ in 0..10 {
                        if s.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
            .ok();
        GpuShareWatcher {
            stop,
            thread,
            gathered,
        }
    }

    /// Stops after one last read and splits each GPU's energy of the run (`energy` per
    /// [`Domain::Gpu`] domain, with its label) over `duration_s`: the command's part.
    pub fn finish(mut self, energy: &crate::EnergyReport) -> Option<GpuShare> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let g = self.gathered.lock().unwrap_or_else(|p| p.into_inner());
        let mut total = 0.0;
        let mut labels: Vec<String> = vec![];
        for d in energy.domains.iter().filter(|d| d.domain == Domain::Gpu) {
            let Some(run) = g.uses.get(&d.socket) else {
                continue;
            };
            let basis = run.basis;
            let window_s = energy.duration_s.max(1e-9);
            let u = GpuUse {
                index: d.socket,
                basis,
                // Busy seconds over the run's: each process's mean utilisation over the run.
                by_pid: run
                    .by_pid
                    .iter()
                    .map(|(&p, &w)| match basis {
                        Some(attribution::GpuShareBasis::Utilisation) => (p, w / window_s),
                        _ => (p, w),
                    })
                    .collect(),
                window_s,
                note: None,
            };
            let s = attribution::split_gpu(d.energy_j, &u, IdlePolicy::Apart);
            total += s
                .by_pid
                .iter()
                .filter(|(p, _)| g.belongs.get(p).copied().unwrap_or(false))
                .map(|(_, j)| j)
                .sum::<f64>();
            if let Some(b) = basis {
                let label = format!(
                    "{}, {}",
                    d.label.as_deref().unwrap_or("measured (nvml)"),
                    b.label()
                );
                if !labels.contains(&label) {
                    labels.push(label);
                }
            }
        }
        (!labels.is_empty()).then(|| GpuShare {
            energy_j: total,
            label: labels.join("; "),
        })
    }
}

impl Drop for GpuShareWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn gather(g: &mut Gathered, uses: Vec<GpuUse>, command: u32, root: &SysRoot) {
    for u in uses {
        let e = g.uses.entry(u.index).or_default();
        if u.basis.is_some() {
            e.basis = u.basis;
        }
        for (pid, w) in u.by_pid {
            match u.basis {
                // Memory is a level, not an amount: the largest seen stands for the run.
                Some(attribution::GpuShareBasis::Memory) => {
                    let m = e.by_pid.entry(pid).or_insert(0.0);
                    *m = m.max(w);
                }
                _ => *e.by_pid.entry(pid).or_insert(0.0) += w * u.window_s,
            }
            g.belongs
                .entry(pid)
                .or_insert_with(|| descends_from(root, pid, command));
        }
    }
}

/// Whether `pid` is `ancestor` or one of its descendants, by the chain of parent pids.
fn descends_from(root: &SysRoot, pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if p == ancestor {
            return true;
        }
        match cputime::read_proc_stat(root, p) {
            Ok(st) if st.ppid != p && st.ppid != 0 => p = st.ppid,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_descends_from_its_parent_and_not_the_reverse() {
        let root = SysRoot::new("/");
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(descends_from(&root, child.id(), me));
        assert!(descends_from(&root, me, me));
        assert!(!descends_from(&root, me, child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
