//! Helpers of the tests that boot a real guest (`qemu-system-x86_64` under TCG, Debian's kernel,
//! an initramfs of `scripts/vm-guest-initramfs.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A script of the repository's `scripts/`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

/// The newest kernel with both an image in /boot and its modules, or what is missing.
pub fn guest_kernel() -> Result<(PathBuf, String), String> {
    let mut found: Vec<String> = std::fs::read_dir("/boot")
        .map_err(|e| format!("/boot: {e}"))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("vmlinuz-"))
                .map(String::from)
        })
        .filter(|v| Path::new("/lib/modules").join(v).is_dir())
        .collect();
    // By version, not text: 6.1.0-10 is newer than 6.1.0-9.
    let key = |v: &String| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    found.sort_by_key(key);
    let v = found
        .pop()
        .ok_or("no /boot/vmlinuz-* with its /lib/modules (apt-get install linux-image-amd64)")?;
    Ok((PathBuf::from(format!("/boot/vmlinuz-{v}")), v))
}

pub fn missing() -> Option<String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !root {
        return Some("not root (the fake RAPL needs a mount namespace)".into());
    }
    for tool in ["qemu-system-x86_64", "busybox", "cpio", "unshare"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            return Some(format!("{tool} not found (make deps installs it)"));
        }
    }
    guest_kernel().err()
}

/// Skips (or, with `WATTIO_REQUIRE_VM`, fails) where the tools are missing.
pub fn can_run() -> bool {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("WATTIO_REQUIRE_VM").is_none(),
            "WATTIO_REQUIRE_VM is set but {why}"
        );
        eprintln!("skipped: {why}");
        return false;
    }
    true
}

/// Writes the initramfs of a guest (`scripts/vm-guest-initramfs.sh OUT BIN KVER ARGS…`).
pub fn guest_initramfs(out: &Path, kver: &str, args: &[&str]) {
    let o = Command::new(script("vm-guest-initramfs.sh"))
        .arg(out)
        .arg(super::BIN)
        .arg(kver)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// QEMU under TCG booting `kernel` with `initrd`, its serial console on stdout, no devices
/// but those the caller adds.
pub fn qemu(kernel: &Path, initrd: &Path, mem_mib: u32, cpus: u32) -> Command {
    let mut c = Command::new("qemu-system-x86_64");
    c.args(["-accel", "tcg", "-m", &mem_mib.to_string()])
        .args(["-smp", &cpus.to_string(), "-nographic"])
        .args(["-no-reboot", "-nodefaults", "-serial", "stdio", "-kernel"])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1"]);
    c
}

/// Runs the guest `qemu` boots and returns its whole console once it powers off, failing after
/// `limit`; the guest is killed when this returns or fails.
pub fn console_of(mut qemu: Command, limit: std::time::Duration) -> String {
    use std::io::Read;
    let mut child = qemu
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let _reaper = super::Reaper(vec![child]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut console = Vec::new();
        let _ = out.read_to_end(&mut console);
        let _ = tx.send(String::from_utf8_lossy(&console).into_owned());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the guest did not power off within {} s", limit.as_secs()))
}

/// The console's text between `WATTIO-NAME-BEGIN` and `WATTIO-NAME-END`.
pub fn between<'a>(console: &'a str, name: &str) -> &'a str {
    console
        .split(&format!("WATTIO-{name}-BEGIN"))
        .nth(1)
        .and_then(|b| b.split(&format!("WATTIO-{name}-END")).next())
        .unwrap_or_else(|| panic!("no {name} block: {console}"))
}
