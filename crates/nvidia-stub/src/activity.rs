//! What the stand-in CUDA driver did, for the stand-in NVML to report: the link that makes a
//! process running `wattio workload gpu` against the stand-in `libcuda` show up in the stand-in
//! NVML's per-process utilisation, running processes and energy counter, as a real process
//! does on a real GPU.
//!
//! When `WATTIO_GPU_STUB_DIR` names a directory, each process using the stand-in CUDA driver
//! appends lines to a file named by its pid:
//!
//! ```text
//! mem GPU BYTES          device memory it holds on GPU (the last line counts)
//! busy GPU START END     a kernel ran on GPU from START to END (µs since the Unix epoch)
//! ```
//!
//! Nothing is written, and no utilisation reported, without the variable.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Mutex;

/// The directory the two stand-ins share, if any.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os("WATTIO_GPU_STUB_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Microseconds since the Unix epoch: NVML's sample timestamps are CPU time in µs.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Appends one line to this process's activity file (nothing without the directory).
pub fn append(line: &str) {
    let Some(d) = dir() else { return };
    let path = d.join(std::process::id().to_string());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// One process's recorded use of one GPU.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessUse {
    pub mem_bytes: u64,
    /// Kernel intervals, µs since the epoch.
    pub busy: Vec<(u64, u64)>,
}

/// What was parsed of each activity file so far: the bytes read and each GPU's use. The
/// stand-in NVML reads the files on every energy reading (a meter may read every few ms), so
/// only what was appended since is parsed.
type Parsed = HashMap<PathBuf, (u64, BTreeMap<u32, ProcessUse>)>;
static PARSED: Mutex<Option<Parsed>> = Mutex::new(None);

/// Every process's use of GPU `gpu`, by pid.
pub fn read(gpu: u32) -> BTreeMap<u32, ProcessUse> {
    let mut out = BTreeMap::new();
    let Some(d) = dir() else { return out };
    let Ok(entries) = std::fs::read_dir(d) else {
        return out;
    };
    let mut cache = PARSED.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path();
        let (done, uses) = cache.entry(path.clone()).or_default();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut text = String::new();
            if f.seek(SeekFrom::Start(*done)).is_ok() && f.read_to_string(&mut text).is_ok() {
                // Whole lines only: a line being appended is read next time.
                let whole = text.rfind('\n').map_or(0, |i| i + 1);
                parse_lines(&text[..whole], uses);
                *done += whole as u64;
            }
        }
        if let Some(u) = uses.get(&gpu) {
            out.insert(pid, u.clone());
        }
    }
    out
}

fn parse_lines(text: &str, uses: &mut BTreeMap<u32, ProcessUse>) {
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["mem", g, b] => {
                if let (Ok(g), Ok(b)) = (g.parse(), b.parse()) {
                    uses.entry(g).or_default().mem_bytes = b;
                }
            }
            ["busy", g, s, t] => {
                if let (Ok(g), Ok(s), Ok(t)) = (g.parse(), s.parse(), t.parse()) {
                    uses.entry(g).or_default().busy.push((s, t));
                }
            }
            _ => {}
        }
    }
}

/// Microseconds of `busy` that fall inside `[from, to)`.
pub fn busy_us_between(busy: &[(u64, u64)], from: u64, to: u64) -> u64 {
    busy.iter()
        .map(|&(s, e)| e.min(to).saturating_sub(s.max(from)))
        .sum()
}

/// Whether process `pid` is still running.
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_clipped_to_the_window() {
        let b = [(100, 200), (300, 400)];
        assert_eq!(busy_us_between(&b, 0, 1000), 200);
        assert_eq!(busy_us_between(&b, 150, 350), 100);
        assert_eq!(busy_us_between(&b, 400, 500), 0);
    }
}
