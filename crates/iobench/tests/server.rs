//! The energy socket with a real meter (the model on this machine's /proc/stat) and a real
//! Unix-domain socket: protocol order, JSON reply, cache preparation, recorded sample.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use wattio_energy::{Mechanism, ModelParams, SourceChoice, SysRoot};
use wattio_iobench::{
    CacheMode, EnergyServer, EnergyServerConfig, EnergyServerEvent, WindowEnergy,
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
