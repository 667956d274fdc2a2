//! Crash test: a real child process writes to the store and is killed with SIGKILL mid-write.
//! The index is rebuilt on reopen; no corrupt entry survives, no temporary file is left, and
//! every surviving object has exactly the content that was written for it.
//!
//! The child is this same test binary running the ignored `crash_child_writer` test.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wattio_cache::FsStore;

/// Deterministic content for object `i`: 0.5–1.5 MB so a kill lands inside a write.
fn content(i: u64) -> Vec<u8> {
    let len = ((i * 7919) % (1024 * 1024)) as usize + 512 * 1024;
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
#[ignore = "child process of kill_mid_write_leaves_no_corrupt_entry"]
fn crash_child_writer() {
    let Ok(dir) = std::env::var("WATTIO_CRASH_DIR") else {
        return;
    };
    let (store, _, _) = FsStore::open(std::path::Path::new(&dir)).unwrap();
    for i in 0u64.. {
        let data = content(i);
        println!("begin {i}");
        // Overwrites too: object names cycle, so a kill can hit a replace of an existing entry.
        store.put_data(&format!("obj-{}", i % 40), &data).unwrap();
        store
            .put_meta(&format!("obj-{}", i % 40), i.to_string().as_bytes())
            .unwrap();
        println!("wrote {i}");
    }
}

/// Kills the child if the parent fails before killing it itself.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kill_mid_write_leaves_no_corrupt_entry() {
    let exe = std::env::current_exe().unwrap();
    let mut total_objects = 0;
    let mut interrupted = 0;
    for round in 0..6u64 {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("WATTIO_CRASH_DIR", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = KillOnDrop(child);
        // Wait for a few completed writes, then kill at a varying moment.
        let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
        let start = Instant::now();
        let want = 3 + round * 4;
        let mut seen = 0;
        while seen < want && start.elapsed() < Duration::from_secs(60) {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("wrote ") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        // Kill right after the child announces its next write (plus a varying delay).
        while let Some(Ok(l)) = lines.next() {
            if l.starts_with("begin ") {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(200 * round));
        child.0.kill().unwrap(); // SIGKILL
        child.0.wait().unwrap();
        assert!(seen >= want, "child wrote only {seen} objects");

        let (store, index, report) = FsStore::open(dir.path()).unwrap();
        interrupted += usize::from(report.removed_temp > 0);
        assert!(
            report.removed_corrupt.is_empty(),
            "atomic writes never leave torn files: {report:?}"
        );
        // No temporary files remain after the rebuild.
        let leftovers = std::fs::read_dir(store.dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".tmp.")
            })
            .count();
        assert_eq!(leftovers, 0);
        assert!(!index.is_empty());
        for (name, e) in &index {
            if e.size.is_none() {
                continue;
            }
            let data = store
                .get_data(name)
                .unwrap_or_else(|err| panic!("entry {name} unreadable: {err}"));
            // Content must be exactly one of the versions written under this name.
            let slot: u64 = name.trim_start_matches("obj-").parse().unwrap();
            let ok = (0..=(seen + 100))
                .filter(|i| i % 40 == slot)
                .any(|i| content(i) == data);
            assert!(ok, "entry {name} holds data that was never written");
            total_objects += 1;
        }
    }
    assert!(total_objects > 0);
    // Evidence the kills landed inside writes: the rebuild removed a temporary file. Each round
    // kills during a ~1 MB write + fsync loop, so most rounds interrupt one.
    eprintln!("rounds that interrupted a write: {interrupted}/6");
    assert!(
        interrupted >= 1,
        "no kill interrupted a write; the test did not exercise recovery"
    );
}
