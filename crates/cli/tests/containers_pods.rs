//! `--by container` and `--by pod` on real cgroups: containers named by podman's own API
//! service (a real container, created, whose cgroup the test makes with the runtime's name
//! for it), and 500 pods named by a list and watch of a stand-in Kubernetes API server
//! (`fixtures/kube_api_standin.py`: the API's wire format over HTTPS, checking the token and the
//! node's field selector), with the series guard holding and a pod that ends mid-interval
//! keeping its energy and its name.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The cgroup v2 hierarchy, where this test may make cgroups (root).
fn unified() -> Option<PathBuf> {
    let u = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.controllers").exists())?;
    let probe = u.join(format!("wattio-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    std::fs::remove_dir(&probe).ok()?;
    Some(u)
}

/// Cgroups made by the test, removed deepest first when it ends (their processes reaped first).
struct Cgroups(Vec<PathBuf>);
impl Cgroups {
    fn make(&mut self, path: &Path) {
        let mut missing = vec![];
        let mut p = path.to_path_buf();
        while !p.exists() {
            missing.push(p.clone());
            p.pop();
        }
        for m in missing.into_iter().rev() {
            std::fs::create_dir(&m).unwrap();
            self.0.push(m);
        }
    }
}
impl Drop for Cgroups {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(p).is_ok() || !p.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A process that moves itself into `cgroup`, then spins one CPU for `seconds` (the shell
/// becomes the spinner: killing the child ends the spin).
fn spin_in(cgroup: &Path, seconds: f64) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}/cgroup.procs' && exec {BIN} workload spin --load 1 --seconds {seconds}",
            cgroup.display()
        ))
        .spawn()
        .unwrap()
}

/// One test at a time: each needs the CPUs for the shares it checks.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

/// `wattio record` of the model, `--by BY` rows every `interval` for `duration` into `out`.
fn record_command(by: &str, interval: &str, duration: &str, out: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "record",
        "--source",
        "model",
        "--by",
        by,
        "--by-interval",
        interval,
    ]);
    c.args([
        "--top",
        "600",
        "--duration",
        duration,
        "-o",
        &out.to_string_lossy(),
    ]);
    c
}

fn record_rows(path: &Path) -> Vec<csv::StringRecord> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    assert!(
        header.iter().collect::<Vec<_>>().join(",").ends_with(
            "entity,pid,comm,cgroup,cpu_s,container_id,container_name,image,pod_uid,pod_name,container_namespace"
        ),
        "{header:?}"
    );
    r.records().map(|x| x.unwrap()).collect()
}

#[test]
fn podman_names_the_containers_its_api_lists() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !require("/usr/bin/podman", "podman") || !require("/bin/busybox", "busybox-static") {
        return;
    }
    let Some(unified) = unified() else {
        eprintln!("SKIPPED: cannot make cgroups (not root, or no cgroup v2 hierarchy)");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let podman = |args: &[&str]| {
        let o = Command::new("podman")
            .args(["--root", &d.path().join("root").to_string_lossy()])
            .args(["--runroot", &d.path().join("run").to_string_lossy()])
            .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "podman {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    // An image of busybox alone, imported: no registry is needed.
    let rootfs = d.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/sh")).unwrap();
    let tar = d.path().join("image.tar");
    assert!(Command::new("tar")
        .args([
            "-C",
            &rootfs.to_string_lossy(),
            "-cf",
            &tar.to_string_lossy(),
            "."
        ])
        .status()
        .unwrap()
        .success());
    podman(&["import", &tar.to_string_lossy(), "localhost/wattio-test:1"]);
    let id = podman(&[
        "create",
        "--name",
        "web-1",
        "localhost/wattio-test:1",
        "/bin/sh",
    ]);
    let socket = d.path().join("podman.sock");
    let mut service = Reaper(vec![Command::new("podman")
        .args(["--root", &d.path().join("root").to_string_lossy()])
        .args(["--runroot", &d.path().join("run").to_string_lossy()])
        .args(["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs"])
        .args(["system", "service", "--time=0"])
        .arg(format!("unix://{}", socket.display()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap()]);
    wait_until(20, "podman's API socket", || socket.exists());

    // The container's cgroup as podman names it (systemd driver), with a spinner in it.
    let mut cgroups = Cgroups(vec![]);
    let cg = unified.join(format!("machine.slice/libpod-{id}.scope"));
    cgroups.make(&cg);
    let kids = Reaper(vec![spin_in(&cg, 8.0)]);
    std::thread::sleep(Duration::from_millis(300));

    let env = |c: &mut Command| {
        c.env("WATTIO_CONTAINER_SOCKET", &socket)
            .env_remove("KUBERNETES_SERVICE_HOST");
    };
    let mut top = Command::new(BIN);
    top.args([
        "top",
        "--by",
        "container",
        "--once",
        "--json",
        "--interval",
        "1",
    ]);
    env(&mut top);
    let o = top.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snap: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let web = snap["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["container_id"] == id.as_str())
        .unwrap_or_else(|| panic!("no entry for the container: {snap}"));
    assert_eq!(web["container_name"], "web-1", "{web}");
    assert_eq!(web["image"], "localhost/wattio-test:1", "{web}");
    assert_eq!(web["named_by"], "podman", "{web}");
    assert!(web["cpu_s"].as_f64().unwrap() > 0.3, "{web}");

    let out = d.path().join("rec.csv");
    let mut record = record_command("container", "1s", "2s", &out);
    env(&mut record);
    let o = record.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = record_rows(&out);
    let named: Vec<_> = rows
        .iter()
        .filter(|r| {
            &r[12] == id.as_str() && &r[13] == "web-1" && &r[14] == "localhost/wattio-test:1"
        })
        .collect();
    assert!(named.len() >= 2, "{rows:?}");
    assert!(named
        .iter()
        .all(|r| r[7] == *"container" && r[11].parse::<f64>().unwrap() > 0.3));
    drop(kids);
    let _ = service.0[0].kill();
}

const NAMESPACE: &str = "shop";

fn uid(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-{i:012x}")
}

fn container_id(i: usize) -> String {
    format!("{i:064x}")
}

fn pod_json(i: usize, name: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid(i), "resourceVersion": "90"},
        "spec": {"nodeName": "node-a"},
        "status": {"containerStatuses": [{
            "name": "app", "image": "registry.example/app:1",
            "containerID": format!("containerd://{}", container_id(i))
        }]}
    })
}

fn pod_cgroup(unified: &Path, i: usize) -> PathBuf {
    unified.join(format!(
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
        uid(i).replace('-', "_")
    ))
}

#[test]
fn pods_are_named_by_a_watch_of_the_nodes_own_pods() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(unified) = unified() else {
        eprintln!("SKIPPED: cannot make cgroups (not root, or no cgroup v2 hierarchy)");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    // The API server's certificate, for 127.0.0.1, and the service account's files.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let sa = d.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    std::fs::write(sa.join("ca.crt"), ca.pem()).unwrap();
    std::fs::write(d.path().join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(d.path().join("key.pem"), key.serialize_pem()).unwrap();
    std::fs::write(sa.join("token"), "sa-token-1\n").unwrap();
    // 500 pods on this node; pod 1 spins steadily, pod 2 spins and ends mid-interval.
    let mut pods: Vec<serde_json::Value> = (0..500)
        .map(|i| pod_json(i, &format!("app-{i:03}")))
        .collect();
    pods[2] = pod_json(2, "ending");
    std::fs::write(
        d.path().join("pods.json"),
        serde_json::to_string(&pods).unwrap(),
    )
    .unwrap();
    let events = d.path().join("events");
    let log = d.path().join("requests.log");
    let port_file = d.path().join("port");
    let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube_api_standin.py");
    let _api = Reaper(vec![Command::new("python3")
        .arg(&standin)
        .args([d.path().join("cert.pem"), d.path().join("key.pem")])
        .args(["sa-token-1", "node-a"])
        .args([
            d.path().join("pods.json"),
            events.clone(),
            port_file.clone(),
            log.clone(),
        ])
        .spawn()
        .unwrap()]);
    wait_until(20, "the stand-in API server", || port_file.exists());
    let port = std::fs::read_to_string(&port_file).unwrap();

    let mut cgroups = Cgroups(vec![]);
    let ctr = |i: usize| {
        pod_cgroup(&unified, i).join(format!("cri-containerd-{}.scope", container_id(i)))
    };
    for i in 0..500 {
        cgroups.make(&ctr(i));
    }
    // One shell visits every pod's container, a little CPU in each: more pods with energy than
    // the series limit allows.
    let list: Vec<String> = (3..500).map(|i| ctr(i).display().to_string()).collect();
    let visitor = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for i in 1 2 3; do for c in {}; do echo $$ > $c/cgroup.procs; n=0; while [ $n -lt 200 ]; do n=$((n+1)); done; done; done; exec sleep 30",
            list.join(" ")
        ))
        .spawn()
        .unwrap();
    let mut kids = Reaper(vec![
        visitor,
        spin_in(&ctr(1), 20.0),
        spin_in(&ctr(2), 20.0),
    ]);

    let env = |c: &mut Command| {
        c.env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", port.trim())
            .env("WATTIO_KUBE_SERVICEACCOUNT", &sa)
            .env("NODE_NAME", "node-a")
            .env_remove("WATTIO_CONTAINER_SOCKET");
    };
    let out = d.path().join("rec.csv");
    let mut record = record_command("pod", "2s", "4500ms", &out);
    env(&mut record);
    let started = Instant::now();
    let recording = record.stderr(Stdio::piped()).spawn().unwrap();
    let (ex, addr) = spawn_exporter(
        &[&MODEL_EXPORTER[..], &["--by", "pod", "--max-series", "20"]].concat(),
        env,
    );

    // Pod 2 ends at 2.8 s, inside the second interval: its process, its cgroups, its pod.
    std::thread::sleep(Duration::from_millis(2800).saturating_sub(started.elapsed()));
    let mut ending = kids.0.remove(2);
    let used = cpu_s(ending.id());
    let _ = ending.kill();
    let _ = ending.wait();
    std::fs::remove_dir(ctr(2)).unwrap();
    std::fs::remove_dir(pod_cgroup(&unified, 2)).unwrap();
    let deleted = serde_json::json!({"type": "DELETED", "object": pod_json(2, "ending")});
    // The pod leaves the list, its watch says so, and then the watch's version expires: a
    // Status of 410, as a real API server sends after compaction.
    pods.remove(2);
    std::fs::write(
        d.path().join("pods.json"),
        serde_json::to_string(&pods).unwrap(),
    )
    .unwrap();
    let bookmark =
        serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "101"}}});
    let gone = serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
        "status": "Failure", "message": "too old resource version: 100 (101)", "reason": "Expired", "code": 410}});
    std::fs::write(&events, format!("{deleted}\n{bookmark}\n{gone}\n")).unwrap();

    let o = recording.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = record_rows(&out);
    let of = |name: &str| -> Vec<&csv::StringRecord> {
        rows.iter()
            .filter(|r| &r[7] == "pod" && &r[16] == name)
            .collect()
    };
    // Every pod that ran is named, in its namespace, with its uid from the cgroup.
    let steady = of("app-001");
    assert!(steady.len() >= 2, "{rows:?}");
    assert!(
        steady
            .iter()
            .all(|r| r[15] == uid(1) && &r[17] == NAMESPACE),
        "{steady:?}"
    );
    let steady_s: f64 = steady.iter().map(|r| r[11].parse::<f64>().unwrap()).sum();
    assert!(
        steady_s > 1.5,
        "app-001 ran {steady_s} CPU-s in 4.5 s: {steady:?}"
    );
    assert!(rows
        .iter()
        .filter(|r| &r[7] == "pod")
        .all(|r| !r[16].is_empty() || &r[9] == "(host)"));
    // The ended pod keeps the CPU time it used in the interval it ended in, and its name.
    let ended: f64 = of("ending")
        .iter()
        .map(|r| r[11].parse::<f64>().unwrap())
        .sum();
    assert!(
        ended > 0.8 * used && ended < 1.1 * used + 0.05,
        "ending: {ended} of {used} CPU-s"
    );
    // The report page lists the pods by name, most energy first.
    let page = d.path().join("page.html");
    let o = Command::new(BIN)
        .args([
            "report",
            &out.to_string_lossy(),
            "-o",
            &page.to_string_lossy(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("shop/app-001") && html.contains("shop/ending"),
        "{html}"
    );
    let named = (3..500)
        .filter(|i| !of(&format!("app-{i:03}")).is_empty())
        .count();
    assert!(named > 20, "only {named} visited pods have rows");

    // The exporter: at most 20 pod series and `other`, named by the API.
    wait_until(10, "a pod series", || {
        http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").contains("pod_name=\"app-001\"")
    });
    let body = http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let series: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("wattio_pod_energy_joules_total{"))
        .collect();
    assert!(series.len() <= 21 && series.len() > 2, "{series:#?}");
    assert!(
        series.iter().any(|l| l.contains("pod_uid=\"other\"")),
        "{series:#?}"
    );
    assert!(series
        .iter()
        .filter(|l| l.contains("pod_name=\"app-"))
        .all(|l| l.contains("container_namespace=\"shop\"")));
    drop(ex);
    drop(kids);

    // Least privilege: every request asked for this node's pods only (the stand-in refuses
    // others), the list came in pages, and the watch began from the list's version.
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(
        requests
            .lines()
            .all(|l| l.starts_with("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&")),
        "{requests}"
    );
    assert!(requests.contains("&continue=p300%26x%3Dy"), "{requests}");
    assert!(
        requests.contains("watch=1") && requests.contains("resourceVersion=100"),
        "{requests}"
    );
    // The 410 made them list again and watch from the new list's version.
    assert!(requests.contains("resourceVersion=102"), "{requests}");
}
