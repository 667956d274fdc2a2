//! The kernel I/O program (`bpf/kio.bpf.c`) on this machine's real kernel: writeback charged
//! to the process that dirtied the pages, network receive softirqs to the socket's reader.
//! Needs root; without it the tests say so and pass, unless `WATTIO_REQUIRE_EBPF=1` (as
//! `make test` sets), which makes them fail.
#![cfg(feature = "ebpf")]

use std::process::{Child, Command};

use wattio_energy::attribution::kernel_io::{Tracer, Work};

fn open_or_skip() -> Option<Tracer> {
    match Tracer::open() {
        Ok(t) => Some(t),
        Err(e) => {
            if std::env::var_os("WATTIO_REQUIRE_EBPF").is_some_and(|v| v == "1") {
                panic!("kernel I/O program unusable and WATTIO_REQUIRE_EBPF=1: {e}");
            }
            eprintln!("skipped: BPF not usable by this process ({e}); run as root or set WATTIO_REQUIRE_EBPF=1 to fail");
            None
        }
    }
}

/// Children killed and reaped when the test ends, passed or not.
struct Reaped(Vec<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn owner_ns(w: &Work, tgid: u32) -> [u64; 5] {
    w.owners
        .iter()
        .find(|o| o.tgid == tgid)
        .map(|o| o.ns)
        .unwrap_or_default()
}

/// The writer of 1 GiB through the page cache is charged the kworkers' writeback of it (and
/// the completions of its requests); a neighbour that spins without writing is charged none.
#[test]
fn writeback_goes_to_the_writer_not_the_neighbour() {
    let Some(t) = open_or_skip() else { return };
    let dir = std::path::Path::new("/var/tmp");
    let file = dir.join(format!("wattio-kio-{}", std::process::id()));
    let kids = Reaped(vec![Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap()]);
    let neighbour = kids.0[0].id();
    // Other writers' dirty pages (the test binaries cargo just linked) written back first.
    assert!(Command::new("sync").status().unwrap().success());
    let before = t.snapshot();
    let mut writer = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .args(["bs=1M", "count=1024", "status=none"])
        .spawn()
        .unwrap();
    let pid = writer.id();
    let written = writer.wait().unwrap();
    // sync(1) queues the writeback to the flusher kworkers and waits for it.
    let synced = Command::new("sync").status().unwrap();
    let after = t.snapshot();
    let _ = std::fs::remove_file(&file);
    assert!(written.success() && synced.success());
    let work = Work::between(&before, &after);
    let mine = owner_ns(&work, pid);
    let all_writeback: u64 = work.owners.iter().map(|o| o.ns[0]).sum();
    eprintln!(
        "writer {pid}: {mine:?}; all owners' writeback {all_writeback} ns; unowned {:?}",
        work.unowned_ns
    );
    assert!(
        mine[0] > 1_000_000,
        "writeback of 1 GiB took under 1 ms: {mine:?}"
    );
    assert!(
        mine[1] > 0,
        "no block completion charged to the writer: {mine:?}"
    );
    assert!(
        mine[0] as f64 >= 0.9 * all_writeback as f64,
        "the writer got {} of {all_writeback} ns of writeback",
        mine[0]
    );
    assert_eq!(
        owner_ns(&work, neighbour),
        [0; 5],
        "the neighbour wrote nothing"
    );
    let from_kworkers: u64 = work
        .doers
        .iter()
        .filter(|d| d.comm.starts_with("kworker"))
        .map(|d| d.task_ns)
        .sum();
    assert!(
        from_kworkers >= mine[0],
        "writeback not taken from kworkers: {:?}",
        work.doers
    );
}

/// A network namespace joined to this one by a veth pair, removed when the test ends.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}a", self.0)])
            .status();
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("ip(8) runs");
    assert!(st.success(), "ip {args:?} failed");
}

/// A receiver in a network namespace is charged the receive softirq time of the traffic a
/// sender in this namespace sends it over veth (a veth transmit runs the peer's receive in the
/// sender's softirq: without the program it is the sender's time).
#[test]
fn receive_softirqs_go_to_the_socket_reader() {
    let Some(t) = open_or_skip() else { return };
    let ns = format!("wkio{}", std::process::id() % 100_000);
    let guard = Netns(ns.clone());
    ip(&["netns", "add", &ns]);
    let (a, b) = (format!("{ns}a"), format!("{ns}b"));
    ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    ip(&["link", "set", &b, "netns", &ns]);
    ip(&["addr", "add", "10.203.7.1/30", "dev", &a]);
    ip(&["link", "set", &a, "up"]);
    ip(&["-n", &ns, "addr", "add", "10.203.7.2/30", "dev", &b]);
    ip(&["-n", &ns, "link", "set", &b, "up"]);
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    let server = "import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('10.203.7.2',5201));s.listen(1);print('ready',flush=True)\nc,_=s.accept()\nn=0\nwhile True:\n  d=c.recv(1<<20)\n  if not d: break\n  n+=len(d)\nprint(n,flush=True)\n";
    let mut receiver = Command::new("ip")
        .args(["netns", "exec", &ns, "python3", "-c", server])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(receiver.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut kids = Reaped(vec![receiver]);
    let before = t.snapshot();
    let client = "import socket\nc=socket.create_connection(('10.203.7.2',5201))\nb=b'x'*(1<<20)\nfor _ in range(1024): c.sendall(b)\nc.close()\n";
    let mut sender = Command::new("python3")
        .args(["-c", client])
        .spawn()
        .unwrap();
    let sender_pid = sender.id();
    assert!(sender.wait().unwrap().success());
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(
        line.trim(),
        (1u64 << 30).to_string(),
        "the receiver got every byte"
    );
    let after = t.snapshot();
    // `ip netns exec` execs python3: the receiver's pid is the child's.
    let receiver_pid = kids.0[0].id();
    let _ = kids.0[0].wait();
    kids.0.clear();
    drop(guard);
    let work = Work::between(&before, &after);
    let got = owner_ns(&work, receiver_pid);
    let all_rx: u64 = work.owners.iter().map(|o| o.ns[2]).sum();
    let taken = work
        .doers
        .iter()
        .find(|d| d.tgid == sender_pid)
        .map(|d| d.irq_ns)
        .unwrap_or(0);
    eprintln!(
        "receiver {receiver_pid}: {got:?}; sender's own receive {} ns; all owners' receive {all_rx} ns; taken from the sender {taken} ns; unowned {:?}",
        owner_ns(&work, sender_pid)[2],
        work.unowned_ns
    );
    assert!(
        got[2] > 1_000_000,
        "receive of 1 GiB took under 1 ms of softirq: {got:?}"
    );
    // The sender owns the receive work of the ACKs its socket gets: between them they own
    // (nearly) all of it, the receiver most.
    let sender_rx = owner_ns(&work, sender_pid)[2];
    let others: Vec<(u32, &str, u64)> = work
        .owners
        .iter()
        .filter(|o| o.ns[2] > 0 && o.tgid != receiver_pid && o.tgid != sender_pid)
        .map(|o| (o.tgid, o.comm.as_str(), o.ns[2]))
        .collect();
    assert!(
        got[2] > sender_rx,
        "the receiver got {} ns, the sender {sender_rx} ns",
        got[2]
    );
    assert!(
        (got[2] + sender_rx) as f64 >= 0.9 * all_rx as f64,
        "the receiver got {} ns and the sender {sender_rx} ns of {all_rx} ns; others: {others:?}",
        got[2]
    );
    assert!(
        taken > 0,
        "no softirq time taken from the sender: {:?}",
        work.doers
    );
}
