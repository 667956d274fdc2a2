//! Built-in workloads: small, deterministic jobs to measure when no other is at hand.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the file I/O workload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileIoReport {
    pub bytes: u64,
    pub write_s: f64,
    pub read_s: f64,
    /// FNV-1a of the data written, checked against what was read back.
    pub checksum: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// Fills `buf` with a deterministic pseudo-random pattern for block `block`.
fn fill(buf: &mut [u8], block: u64) {
    let mut x = block.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        // xorshift64: cheap, deterministic, incompressible enough for I/O.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Writes `bytes` of deterministic data to a new file in `dir`, `fsync`s it, reads it back
/// verifying every byte's checksum, and removes it (also on error).
pub fn file_io_workload(dir: &Path, bytes: u64) -> io::Result<FileIoReport> {
    const BLOCK: usize = 1 << 20;
    let path: PathBuf = dir.join(format!("wattio-workload-{}.bin", std::process::id()));
    struct Cleanup<'a>(&'a Path);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let _ = fs::remove_file(self.0);
        }
    }
    let _cleanup = Cleanup(&path);
    let mut buf = vec![0u8; BLOCK];
    let t0 = Instant::now();
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    let mut h = FNV_OFFSET;
    let mut left = bytes;
    let mut block = 0;
    while left > 0 {
        let n = left.min(BLOCK as u64) as usize;
        fill(&mut buf[..n], block);
        h = fnv1a(h, &buf[..n]);
        f.write_all(&buf[..n])?;
        left -= n as u64;
        block += 1;
    }
    f.sync_all()?;
    drop(f);
    let write_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut f = File::open(&path)?;
    let mut h2 = FNV_OFFSET;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h2 = fnv1a(h2, &buf[..n]);
    }
    let read_s = t1.elapsed().as_secs_f64();
    if h != h2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("read-back checksum {h2:#x} differs from written {h:#x}: the file system returned different data"),
        ));
    }
    Ok(FileIoReport {
        bytes,
        write_s,
        read_s,
        checksum: h,
    })
}

/// Busy-waits for `load` of every `period` (0 ≤ load ≤ 1) until `duration` has passed: a CPU
/// load of known size, used by the attribution tests and as a calibration load.
///
/// Each period burns `load × period` of this thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`,
/// so time the scheduler gives to others does not count) and sleeps until the period ends.
/// Returns the CPU seconds burnt.
pub fn spin_cpu(load: f64, period: std::time::Duration, duration: std::time::Duration) -> f64 {
    let load = if load.is_finite() {
        load.clamp(0.0, 1.0)
    } else {
        0.0
    };
    use wattio_energy::attribution::cputime::thread_cpu_s as thread_cpu;
    let start = std::time::Instant::now();
    let cpu0 = thread_cpu();
    let mut x = 1u64;
    let mut next = start;
    while start.elapsed() < duration {
        next += period;
        let until = thread_cpu() + load * period.as_secs_f64();
        while thread_cpu() < until && std::time::Instant::now() < next {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let now = std::time::Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    thread_cpu() - cpu0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_reads_back_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let r = file_io_workload(dir.path(), 3 * 1024 * 1024 + 5).unwrap();
        assert_eq!(r.bytes, 3 * 1024 * 1024 + 5);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // Same data, same checksum.
        assert_eq!(
            file_io_workload(dir.path(), 3 * 1024 * 1024 + 5)
                .unwrap()
                .checksum,
            r.checksum
        );
    }

    #[test]
    fn fnv1a_reference_vectors() {
        // Published FNV-1a 64 test vectors (Fowler/Noll/Vo): "" and "a".
        assert_eq!(fnv1a(FNV_OFFSET, b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63dc4c8601ec8c);
    }
}
