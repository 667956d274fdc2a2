//! End to end: `wattio testbed up` builds the namespaces and the delay line, the RTT through it
//! matches the setting, `down` removes everything; a failed `up` leaves nothing behind. Needs
//! root, /dev/net/tun and iproute2 (CI runs as root; `scripts/install-deps.sh` installs
//! iproute2). Each test uses its own testbed name and tears it down in `Drop`, so a failing
//! assertion still cleans up.

use std::path::Path;
use std::process::{Command, Output};

fn wattio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wattio"))
        .args(args)
        .output()
        .expect("run wattio")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Takes the testbed down when dropped (also on panic).
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = wattio(&["testbed", "--name", &self.0, "down"]);
    }
}

fn is_root() -> bool {
    // Effective uid is the second field of the Uid: line.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Processes of this testbed's delay line still alive.
fn daemons(name: &str) -> Vec<String> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let args: Vec<_> = c
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.iter().any(|a| a == "delay-line")
                && args.windows(2).any(|w| w[0] == "--name" && w[1] == name)
            {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                if !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                {
                    out.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

fn gone(name: &str) {
    for side in ["client", "server"] {
        assert!(
            !Path::new(&format!("/run/netns/{name}-{side}")).exists(),
            "netns {name}-{side} left behind"
        );
    }
    assert!(
        !Path::new(&format!("/run/wattio-testbed/{name}")).exists(),
        "state dir left behind"
    );
    assert!(
        daemons(name).is_empty(),
        "delay line still running: {:?}",
        daemons(name)
    );
}

fn require_root() -> bool {
    if !is_root() || !Path::new("/dev/net/tun").exists() {
        // CI runs as root; a developer without root sees why nothing ran.
        eprintln!("skipping: needs root and /dev/net/tun (CI runs it as root)");
        return false;
    }
    true
}

#[test]
fn up_checks_rtt_and_down_removes_everything() {
    if !require_root() {
        return;
    }
    let name = format!("wtci{}", std::process::id() % 100_000);
    let _g = Guard(name.clone());
    let up = wattio(&[
        "testbed", "--name", &name, "up", "--rate", "200mbit", "--rtt", "30ms",
    ]);
    assert!(up.status.success(), "up failed: {}", text(&up));
    let out = text(&up);
    assert!(
        out.contains("client 10.77.0.1") && out.contains("server 10.77.0.2"),
        "addresses not printed: {out}"
    );
    for side in ["client", "server"] {
        let ns = format!("{name}-{side}");
        assert!(
            Path::new(&format!("/run/netns/{ns}")).exists(),
            "netns {ns} missing"
        );
        let q = Command::new("tc")
            .args(["-n", &ns, "qdisc", "show", "dev", "wt0"])
            .output()
            .unwrap();
        let q = text(&q);
        assert!(
            q.contains("tbf") && q.contains("200Mbit"),
            "no TBF at 200 Mbit in {ns}: {q}"
        );
    }
    assert_eq!(daemons(&name).len(), 1, "exactly one delay line expected");

    // The RTT TCP sees is the setting (min of 10 handshakes, within 1 ms).
    let chk = wattio(&["testbed", "--name", &name, "check", "--rtt-only", "--json"]);
    assert!(chk.status.success(), "check failed: {}", text(&chk));
    let r: serde_json::Value = serde_json::from_slice(&chk.stdout).unwrap();
    let rtt = r["rtt_min_ms"].as_f64().unwrap();
    assert!((rtt - 30.0).abs() <= 1.0, "RTT {rtt} ms, set 30 ms");
    assert!(
        rtt >= 30.0 - 0.05,
        "RTT {rtt} ms is below the programmed delay: the delay line is bypassed"
    );

    // Commands run inside the namespaces, which have their own TCP settings.
    let cc = wattio(&[
        "testbed",
        "--name",
        &name,
        "exec",
        "client",
        "--",
        "cat",
        "/proc/sys/net/ipv4/tcp_congestion_control",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&cc.stdout).trim(),
        "cubic",
        "{}",
        text(&cc)
    );
    let code = wattio(&[
        "testbed", "--name", &name, "exec", "server", "--", "sh", "-c", "exit 7",
    ]);
    assert_eq!(
        code.status.code(),
        Some(7),
        "exec must pass the exit code through"
    );

    // Idempotent up: same settings leave the same daemon running.
    let pid = daemons(&name);
    let again = wattio(&[
        "testbed", "--name", &name, "up", "--rate", "200mbit", "--rtt", "30ms",
    ]);
    assert!(
        again.status.success() && text(&again).contains("already up"),
        "{}",
        text(&again)
    );
    assert_eq!(daemons(&name), pid);

    // A process left inside a namespace does not keep it alive past `down`.
    let bg = wattio(&[
        "testbed",
        "--name",
        &name,
        "exec",
        "server",
        "--",
        "sh",
        "-c",
        "sleep 300 >/dev/null 2>&1 &",
    ]);
    assert!(bg.status.success());

    let down = wattio(&["testbed", "--name", &name, "down"]);
    assert!(down.status.success(), "down failed: {}", text(&down));
    gone(&name);
    let down2 = wattio(&["testbed", "--name", &name, "down"]);
    assert!(
        down2.status.success() && text(&down2).contains("nothing to remove"),
        "{}",
        text(&down2)
    );

    let ex = wattio(&["testbed", "--name", &name, "exec", "client", "--", "true"]);
    assert_eq!(ex.status.code(), Some(2));
    assert!(text(&ex).contains("not up"), "{}", text(&ex));
}

#[test]
fn a_failed_up_leaves_nothing_behind() {
    if !require_root() {
        return;
    }
    let name = format!("wtcf{}", std::process::id() % 100_000);
    let _g = Guard(name.clone());
    // tc refuses this queue limit after both namespaces and the first TUN exist.
    let up = wattio(&[
        "testbed",
        "--name",
        &name,
        "up",
        "--rate",
        "100mbit",
        "--rtt",
        "10ms",
        "--queue-bytes",
        "50000000000",
    ]);
    assert_eq!(up.status.code(), Some(2), "{}", text(&up));
    let msg = text(&up);
    assert!(
        msg.contains("cleaned up") && msg.contains("limit"),
        "error should name the cause: {msg}"
    );
    assert_eq!(
        msg.trim().lines().count(),
        1,
        "one-line error expected: {msg}"
    );
    gone(&name);
}

#[test]
fn bad_flags_are_one_line_errors() {
    let r = wattio(&["testbed", "up", "--rate", "fast", "--rtt", "10ms"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r).contains("rate 'fast'"), "{}", text(&r));
    let r = wattio(&["testbed", "--name", "Bad Name", "down"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(text(&r).contains("invalid"), "{}", text(&r));
    let r = wattio(&["testbed", "up", "--profile", "mars"]);
    assert!(text(&r).contains("cloudlab"), "{}", text(&r));
}
