//! Loading `bpf/kio.bpf.c` and reading its maps.

use std::io;

use libbpf_rs::{MapCore, MapFlags, ObjectBuilder};

use super::{Counters, DoerRecord, OwnerRecord};

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kio.bpf.o"));

/// Bytes of `struct owner_work` and `struct doer_work`.
const OWNER_BYTES: usize = 72;
const DOER_BYTES: usize = 48;

/// Tracepoints the program can do without, with the kernel release that added each: socket
/// ownership (6.4), UDP data ready (6.6), cross-CPU calls (6.5). Every other one is in 6.1.
const OPTIONAL: [&str; 5] = [
    "sock_send_length",
    "sock_recv_length",
    "sk_data_ready",
    "csd_function_entry",
    "csd_function_exit",
];

/// The tracepoints the kernel's BTF (`/sys/kernel/btf/vmlinux`, bytes `btf`) names: each has a
/// `btf_trace_<name>` type, whose name is a NUL-terminated string of the BTF's string section.
pub fn btf_tracepoints(btf: &[u8]) -> std::collections::HashSet<&[u8]> {
    btf.split(|&b| b == 0)
        .filter_map(|s| s.strip_prefix(b"btf_trace_".as_slice()))
        .collect()
}

/// The kernel I/O program, loaded and attached to its tracepoints.
pub struct Tracer {
    _links: Vec<libbpf_rs::Link>,
    object: libbpf_rs::Object,
}

fn comm(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// Decodes an `owners` record of `tgid`; `None` for a value of another size.
pub fn decode_owner(tgid: u32, b: &[u8]) -> Option<OwnerRecord> {
    (b.len() == OWNER_BYTES).then(|| OwnerRecord {
        tgid,
        ns: std::array::from_fn(|k| u64_at(b, 8 * k)),
        cgroup_id: u64_at(b, 40),
        start_ns: u64_at(b, 48),
        comm: comm(&b[56..72]),
    })
}

/// Decodes a `doers` record of `tgid`.
pub fn decode_doer(tgid: u32, b: &[u8]) -> Option<DoerRecord> {
    (b.len() == DOER_BYTES).then(|| DoerRecord {
        tgid,
        task_ns: u64_at(b, 0),
        irq_ns: u64_at(b, 8),
        cgroup_id: u64_at(b, 16),
        start_ns: u64_at(b, 24),
        comm: comm(&b[32..48]),
    })
}

impl Tracer {
    /// Loads and attaches the program; the error names the step that failed and why.
    pub fn open() -> io::Result<Tracer> {
        if !crate::attribution::task_iter::in_initial_pid_namespace() {
            return Err(io::Error::other(
                "not in the initial pid namespace: the kernel I/O program's pids would not match /proc",
            ));
        }
        crate::ebpf::quiet_libbpf();
        let fail = |step: &str, e: libbpf_rs::Error| {
            let why = crate::ebpf::libbpf_last_message()
                .map(|m| format!(" (libbpf: {m})"))
                .unwrap_or_default();
            io::Error::other(format!("{step}: {e}{why}"))
        };
        let mut open = ObjectBuilder::default()
            .open_memory(OBJECT)
            .map_err(|e| fail("opening the kernel I/O program", e))?;
        // Tracepoints newer than the kernel: their programs stay out (the work they see then
        // has no owner), the rest loads.
        let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
        let present = btf_tracepoints(&btf);
        for mut prog in open.progs_mut() {
            let section = prog.section().to_string_lossy().into_owned();
            if let Some(tp) = section.strip_prefix("tp_btf/") {
                if OPTIONAL.contains(&tp) && !present.contains(tp.as_bytes()) {
                    prog.set_autoload(false);
                }
            }
        }
        let object = open
            .load()
            .map_err(|e| fail("loading the kernel I/O program", e))?;
        let mut links = Vec::new();
        for prog in object.progs_mut().filter(|p| p.autoload()) {
            let name = prog.name().to_string_lossy().into_owned();
            links.push(
                prog.attach()
                    .map_err(|e| fail(&format!("attaching the kernel I/O program {name}"), e))?,
            );
        }
        Ok(Tracer {
            _links: links,
            object,
        })
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        self.object
            .maps()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("bpf/kio.bpf.c defines the map {name}"))
    }

    /// The first (up to) five entries of the array map `name` (0 past its end).
    fn array(&self, name: &str) -> [u64; 5] {
        let m = self.map(name);
        std::array::from_fn(|k| {
            m.lookup(&(k as u32).to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .filter(|v| v.len() == 8)
                .map(|v| u64_at(&v, 0))
                .unwrap_or(0)
        })
    }

    /// Every record of the hash map `name` keyed by tgid, decoded: in batches of 1,024 (one
    /// system call each, where the kernel has batch lookups: 5.6 on), else one lookup a key.
    fn records<R>(
        &self,
        name: &str,
        decode: fn(u32, &[u8]) -> Option<R>,
    ) -> std::collections::HashMap<u32, R> {
        let m = self.map(name);
        let entry = |k: &[u8], v: &[u8]| {
            let tgid = u32::from_ne_bytes(<[u8; 4]>::try_from(k).ok()?);
            Some((tgid, decode(tgid, v)?))
        };
        if let Ok(batch) = m.lookup_batch(1024, MapFlags::ANY, MapFlags::ANY) {
            let out: std::collections::HashMap<u32, R> =
                batch.filter_map(|(k, v)| entry(&k, &v)).collect();
            if !out.is_empty() {
                return out;
            }
        }
        m.keys()
            .filter_map(|k| {
                let v = m.lookup(&k, MapFlags::ANY).ok().flatten()?;
                entry(&k, &v)
            })
            .collect()
    }

    /// Every owner's and doer's counters now.
    pub fn snapshot(&self) -> Counters {
        let mut s = Counters {
            unowned_ns: self.array("unowned"),
            ..Counters::default()
        };
        s.owners = self.records("owners", decode_owner);
        s.doers = self.records("doers", decode_doer);
        s
    }

    /// Watches process `tgid` and the processes it starts from now on, and no other: the
    /// processes watched before are forgotten (`wattio measure`).
    pub fn watch(&self, tgid: u32) -> io::Result<()> {
        let m = self.map("watched");
        for k in m.keys().collect::<Vec<_>>() {
            let _ = m.delete(&k);
        }
        self.map("watched")
            .update(&tgid.to_ne_bytes(), &[1], MapFlags::ANY)
            .map_err(io::Error::other)
    }

    /// Stops watching `tgid` (its children started meanwhile stay watched).
    pub fn unwatch(&self, tgid: u32) {
        let _ = self.map("watched").delete(&tgid.to_ne_bytes());
    }

    /// The kernel I/O work done for watched processes since the program loaded, by kind, and
    /// the interrupt-frame time they gave to others' (or their own) I/O work.
    pub fn watched_ns(&self) -> ([u64; 5], u64) {
        (self.array("watched_ns"), self.array("watched_gave_ns")[0])
    }
}

#[cfg(test)]
mod tests {
    /// The names come from the string section's NUL-terminated strings that start with
    /// `btf_trace_`; a name inside another string is not one.
    #[test]
    fn tracepoints_are_read_from_the_btf_strings() {
        let btf =
            b"\x9f\xeb\x01\0int\0btf_trace_sched_switch\0xbtf_trace_fake\0btf_trace_tcp_probe\0";
        let tps = super::btf_tracepoints(btf);
        assert!(tps.contains(b"sched_switch".as_slice()) && tps.contains(b"tcp_probe".as_slice()));
        assert!(
            !tps.contains(b"fake".as_slice()) && tps.len() == 2,
            "{tps:?}"
        );
    }

    /// This machine's own BTF names the tracepoints every kernel the program runs on has.
    #[test]
    fn this_kernel_names_its_tracepoints() {
        let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux");
            return;
        };
        let tps = super::btf_tracepoints(&btf);
        for tp in [
            "sched_switch",
            "softirq_entry",
            "block_rq_complete",
            "writeback_dirty_folio",
        ] {
            assert!(
                tps.contains(tp.as_bytes()),
                "{tp} not found among {} tracepoints",
                tps.len()
            );
        }
    }
}
