//! The energy socket with a real meter (the model on this machine's /proc/stat) and a real
//! Unix-domain socket: protocol order, JSON reply, cache preparation, recorded sample.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use wattio_energy::{Mechanism, ModelParams, SourceChoice, SysRoot};
use wattio_iobench::{
    CacheMode, EnergyServer, EnergyServerConfig, EnergyServerEvent, OperationDiskWatch,
    WindowEnergy,
};
use wattio_meter::{Meter, MeterConfig};

fn model_meter() -> Arc<Meter> {
    let cfg = MeterConfig {
        root: SysRoot::new("/"),
        choice: SourceChoice::Only(Mechanism::Model),
        domains: None,
        model: ModelParams::default(),
        platforms: Vec::new(),
    };
    Arc::new(Meter::open(&cfg).expect("the model source needs only /proc/stat"))
}

struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
}

impl Client {
    fn call(&mut self, line: &str) -> String {
        self.w.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut s = String::new();
        self.r.read_line(&mut s).unwrap();
        s.trim_end().to_string()
    }
}

fn start(cache: CacheMode) -> EnergyServer {
    EnergyServer::start(
        model_meter(),
        EnergyServerConfig {
            cache,
            model: ModelParams::default(),
            n_cpus: 2,
            root: SysRoot::new("/"),
            disks: None,
        },
    )
    .unwrap()
}

fn connect(s: &EnergyServer) -> Client {
    let w = UnixStream::connect(s.path()).unwrap();
    Client {
        r: BufReader::new(w.try_clone().unwrap()),
        w,
    }
}

/// utime + stime of `pid` in clock ticks (USER_HZ = 100 on Linux).
fn ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat; `after` starts at field 3.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn a_run_through_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, vec![b'x'; 1 << 20]).unwrap();
    let server = start(CacheMode::Warm);
    let mut c = connect(&server);
    // A busy single-threaded child stands in for the JVM; its CPU time is checked against the
    // kernel's tick count in /proc/PID/stat (independent of schedstat, coarser).
    let mut child = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let pid = child.id();
    assert_eq!(
        c.call(&format!(
            "HELLO op=read method=channel size=tiny buffer=8192 pid={pid}"
        )),
        "OK"
    );
    let prep = c.call(&format!("PREPARE {}", input.display()));
    assert!(prep.starts_with("OK cache=warm resident=1.000"), "{prep}");
    let ticks0 = ticks(pid);
    assert_eq!(c.call("BEGIN"), "OK");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let reply = c.call("END ns=40000000");
    let ticks1 = ticks(pid);
    child.kill().unwrap();
    child.wait().unwrap();
    let w: WindowEnergy = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert!(
        w.provenance.estimated
            && w.scope == "process"
            && w.provenance.mechanism == wattio_energy::Mechanism::Model,
        "{w:?}"
    );
    assert!(w
        .provenance
        .model
        .as_deref()
        .unwrap()
        .contains("ccf-linear"));
    let tick_cpu = (ticks1 - ticks0) as f64 / 100.0;
    assert!(w.window_s >= 0.3, "{w:?}");
    assert!(
        w.cpu_s > 0.0 && (w.cpu_s - tick_cpu).abs() <= 0.03,
        "schedstat {} s vs stat ticks {tick_cpu} s",
        w.cpu_s
    );
    // The model's formula with the test's own arithmetic: 0.74 W × 2 vCPU × wall + (3.5 − 0.74) W × cpu.
    let want = 0.74 * 2.0 * w.window_s + (3.5 - 0.74) * w.cpu_s;
    assert!((w.energy_j - want).abs() < 1e-9, "{} vs {want}", w.energy_j);
    // The JVM's attributed share of the window's whole-machine figure, within it.
    let share = wattio_energy::attribution::share_j(w.system_energy_j, 2, w.window_s, w.cpu_s);
    let pj = w.attributed_j.expect("attributed_j in the END reply");
    assert!((pj - share).abs() < 1e-12, "{pj} vs {share}");
    assert!(
        pj <= w.system_energy_j + 1e-12,
        "{pj} of {}",
        w.system_energy_j
    );
    assert!(
        w.attributed_label
            .as_deref()
            .unwrap()
            .ends_with("), attributed (cpu-time share)"),
        "{w:?}"
    );
    assert_eq!(c.call("CHECK ok=true bytes=1048576 got=ab want=ab"), "OK");
    drop(c);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let ev = server.drain();
    let samples: Vec<_> = ev
        .iter()
        .map(|e| match e {
            EnergyServerEvent::Sample(s) => s,
            EnergyServerEvent::Error(e) => panic!("server error: {e}"),
        })
        .collect();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].method, "channel");
    assert_eq!(samples[0].pid, pid);
    assert_eq!(samples[0].bytes, 1 << 20);
    assert!((samples[0].time_s - 0.04).abs() < 1e-12);
    assert!(samples[0].ok);
}

#[test]
fn out_of_order_and_unknown_requests_get_err() {
    let server = start(CacheMode::Cold);
    let mut c = connect(&server);
    assert!(c.call("BEGIN").starts_with("ERR BEGIN before HELLO"));
    assert!(c.call("FLY away").starts_with("ERR unknown request 'FLY'"));
    assert!(c
        .call("HELLO op=read method=x size=huge buffer=1 pid=1")
        .contains("unknown size"));
    let pid = std::process::id();
    assert_eq!(
        c.call(&format!(
            "HELLO op=seek method=raf size=tiny buffer=8192 pid={pid}"
        )),
        "OK"
    );
    assert!(c.call("END ns=1").starts_with("ERR"), "END without BEGIN");
    assert!(c.call("PREPARE relative/path").contains("absolute path"));
    assert!(c
        .call("PREPARE /nonexistent/wattio-input")
        .starts_with("ERR"));
    drop(c);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(server
        .drain()
        .iter()
        .all(|e| matches!(e, EnergyServerEvent::Error(_))));
}

#[test]
fn dropping_the_server_removes_the_socket() {
    let server = start(CacheMode::Warm);
    let p = server.path().to_path_buf();
    assert!(p.exists());
    drop(server);
    assert!(!p.exists());
}

fn write(base: &std::path::Path, rel: &str, text: &str) {
    let p = base.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn stat_line(sectors_read: u64, io_ticks_ms: u64) -> String {
    format!("10 0 {sectors_read} 5 20 0 0 9 0 {io_ticks_ms} 14 0 0 0 0 0 0\n")
}

/// A fixture root whose one disk, `nvme0n1`, is an NVMe stand-in with one operational state
/// (8 W at most, 1.5 W idle, 7.5 W active), and whose `/sys/dev/block` maps the real device
/// number of `holding`'s file system to it, so `disks_holding` finds the real file on it.
fn nvme_root(base: &std::path::Path, holding: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(holding).unwrap().dev();
    let number = format!("{}:{}", libc::major(dev), libc::minor(dev));
    assert_ne!(
        libc::major(dev),
        0,
        "{} must be on a block device",
        holding.display()
    );
    write(base, "sys/block/nvme0n1/dev", &format!("{number}\n"));
    write(base, "sys/block/nvme0n1/queue/rotational", "0\n");
    write(base, "sys/block/nvme0n1/stat", &stat_line(100, 1000));
    std::fs::create_dir_all(base.join("sys/class/nvme/nvme0/nvme0n1")).unwrap();
    std::fs::create_dir_all(base.join("sys/class/block")).unwrap();
    std::fs::create_dir_all(base.join("sys/dev/block")).unwrap();
    std::os::unix::fs::symlink(
        base.join("sys/block/nvme0n1"),
        base.join("sys/class/block/nvme0n1"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        base.join("sys/block/nvme0n1"),
        base.join("sys/dev/block").join(&number),
    )
    .unwrap();
    std::fs::create_dir_all(base.join("dev")).unwrap();
    wattio_devices::nvme::StandInController {
        model: "WATTIO ONE-STATE NVME".into(),
        states: vec![wattio_devices::PowerState {
            id: 0,
            name: String::new(),
            max_w: 8.0,
            idle_w: Some(1.5),
            active_w: Some(7.5),
            non_operational: false,
            entry_latency_us: 0,
            exit_latency_us: 0,
        }],
        current: 0,
        apst: wattio_devices::nvme::ApstTable {
            enabled: false,
            entries: vec![],
        },
    }
    .write(&base.join("dev/nvme0"))
    .unwrap();
}

#[test]
fn the_window_carries_the_interval_of_the_disk_holding_the_file() {
    // The input in the build's own temporary directory: on a disk, where /tmp may be tmpfs.
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let input = data.path().join("in.txt");
    std::fs::write(&input, vec![b'x'; 1 << 16]).unwrap();
    let fixture = tempfile::tempdir().unwrap();
    nvme_root(fixture.path(), &input);
    let disks = OperationDiskWatch::open(&SysRoot::new(fixture.path())).unwrap();
    let server = EnergyServer::start(
        model_meter(),
        EnergyServerConfig {
            cache: CacheMode::Warm,
            model: ModelParams::default(),
            n_cpus: 2,
            root: SysRoot::new("/"),
            disks: Some(disks),
        },
    )
    .unwrap();
    let mut c = connect(&server);
    let pid = std::process::id();
    assert_eq!(
        c.call(&format!(
            "HELLO op=read method=channel size=tiny buffer=8192 pid={pid}"
        )),
        "OK"
    );
    assert!(c
        .call(&format!("PREPARE {}", input.display()))
        .starts_with("OK"));
    assert_eq!(c.call("BEGIN"), "OK");
    // 128 sectors read and 100 ms busy inside the window.
    std::thread::sleep(std::time::Duration::from_millis(150));
    write(
        fixture.path(),
        "sys/block/nvme0n1/stat",
        &stat_line(228, 1100),
    );
    std::thread::sleep(std::time::Duration::from_millis(150));
    let reply = c.call("END ns=1000000");
    let w: WindowEnergy = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply}"));
    let d = w.disk.expect("the disk figures in the END reply");
    assert_eq!(d.disks, vec!["nvme0n1".to_string()]);
    let i = d
        .interval
        .unwrap_or_else(|| panic!("no interval: {}", d.label));
    // One state: idle 1.5 W and at most 8 W over the disk's window, which is the END window
    // within the few milliseconds between the meter's and the disks' reads.
    let span = |j: f64, w_per: f64| j / w_per;
    assert!(
        (span(i.lower_j, 1.5) - w.window_s).abs() < 0.05,
        "{i:?} over {} s",
        w.window_s
    );
    assert!(
        (span(i.upper_j, 8.0) - span(i.lower_j, 1.5)).abs() < 1e-9,
        "{i:?}"
    );
    if let Some(central) = i.central_j {
        // 0.1 s busy at 7.5 W, the rest idle at 1.5 W.
        let want = 0.1 * 7.5 + (span(i.lower_j, 1.5) - 0.1) * 1.5;
        assert!((central - want).abs() < 1e-6, "{central} vs {want}");
    }
    assert!(
        d.label
            .starts_with("nvme0n1: estimated (device-reported interval"),
        "{}",
        d.label
    );
}
