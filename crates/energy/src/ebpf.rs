//! RAPL through the perf `power` PMU, read in the kernel by a BPF program (`--source ebpf`).
//!
//! The fourth mechanism of Raffin & Trystram (2024, §III-F): the RAPL events are opened exactly
//! as the perf mechanism opens them ([`crate::perf::open_events`]) and stored in a
//! `BPF_MAP_TYPE_PERF_EVENT_ARRAY`; a BPF program (`bpf/rapl.bpf.c`) attached to a software
//! `cpu-clock` timer on each CPU of the PMU's cpumask (one per package) reads that CPU's events
//! with `bpf_perf_event_read_value` on every tick and hands one timestamped record of raw counts
//! to user space through a ring buffer. User space keeps each counter's newest count; the counts
//! are the perf mechanism's, with its counter specifications ([`crate::perf::counter_spec`]: the PMU's
//! scale, a wrap at 2^64), so units and wrap correction are the same code ([`crate::Accumulator`]).
//!
//! The timer ticks at the rate the reader asks for ([`Source::set_rate_hz`]; [`DEFAULT_HZ`]
//! until then). A read returns the newest kernel reading of each counter, at most one tick old.
//!
//! The part that needs a BPF toolchain (loading the program, the ring buffer) is behind the Cargo
//! feature `ebpf`; without it [`open`] says how to get a build that has it. The records' layout
//! and the bookkeeping from records to counts ([`RingRecord`], [`SlotPlan`], [`NewestCounts`]) are
//! plain Rust, always built and tested.

use crate::error::EnergyError;
use crate::perf::PowerPmu;
use crate::root::SysRoot;
use crate::types::{Domain, Mechanism};
use crate::Source;

#[cfg(feature = "ebpf")]
mod bpf;
#[cfg(feature = "ebpf")]
pub use bpf::EbpfSource;
#[cfg(feature = "ebpf")]
pub(crate) use bpf::{libbpf_last_message, quiet_libbpf};

/// Events one CPU's record carries; `MAX_EVENTS_PER_CPU` in `bpf/rapl.bpf.c` (RAPL has at most
/// five domains per package).
pub(crate) const MAX_EVENTS_PER_CPU: usize = 8;

/// The timer rate before a reader sets one: a read is then at most 10 ms behind the counters.
pub(crate) const DEFAULT_HZ: f64 = 100.0;

/// Whether this build has the eBPF mechanism (Cargo feature `ebpf`).
pub const EBPF_BUILT_IN: bool = cfg!(feature = "ebpf");

/// What to do about a build without the feature.
pub(crate) const NOT_BUILT_FIX: &str = "rebuild with it: `make deps build` (installs clang, libelf-dev, zlib1g-dev and pkg-config, then builds with the feature when they are there) or `cargo build --release -p wattio --features ebpf`";

/// What to do when the kernel lacks something the program needs.
pub(crate) const KERNEL_FIX: &str = "the eBPF mechanism needs Linux >= 5.8 built with CONFIG_BPF_SYSCALL=y and CONFIG_BPF_EVENTS=y (ring buffers, perf_event programs); on older or trimmed kernels use --source perf";

/// One record of the ring buffer: the raw counts of the events opened on `cpu` (map indices
/// `first .. first + count`), read at `mono_ns` (CLOCK_MONOTONIC, `bpf_ktime_get_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingRecord {
    pub mono_ns: u64,
    pub cpu: u32,
    pub first: u32,
    pub count: u32,
    /// 0, or the first (negative) error `bpf_perf_event_read_value` returned in this tick.
    pub error: i32,
    pub counts: [u64; MAX_EVENTS_PER_CPU],
}

impl RingRecord {
    /// Bytes of `struct reading` in `bpf/rapl.bpf.c`.
    pub const SIZE: usize = 24 + 8 * MAX_EVENTS_PER_CPU;

    /// Parses one record as the program wrote it (native byte order); `None` when it is short.
    pub fn decode(b: &[u8]) -> Option<RingRecord> {
        if b.len() < Self::SIZE {
            return None;
        }
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let mut counts = [0u64; MAX_EVENTS_PER_CPU];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = u64_at(24 + 8 * i);
        }
        Some(RingRecord {
            mono_ns: u64_at(0),
            cpu: u32_at(8),
            first: u32_at(12),
            count: u32_at(16),
            error: u32_at(20) as i32,
            counts,
        })
    }

    /// The record's bytes as the program writes them (for tests of the user-space half).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::SIZE);
        b.extend_from_slice(&self.mono_ns.to_ne_bytes());
        for v in [self.cpu, self.first, self.count, self.error as u32] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for c in self.counts {
            b.extend_from_slice(&c.to_ne_bytes());
        }
        b
    }
}

/// Where each counter sits in the program's event array: the events of one CPU are contiguous,
/// because the program reads only its own CPU's slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    /// (cpu, first map index, number of events), one per CPU, in order of first appearance.
    pub cpus: Vec<(u32, u32, u32)>,
    /// `counter_of_index[k]` is the counter (source order) at map index `k`.
    pub counter_of_index: Vec<usize>,
}

impl SlotPlan {
    /// The plan for counters bound to `cpus[i]` (source order, as the perf mechanism opens them).
    pub fn new(cpus: &[u32]) -> Result<SlotPlan, EnergyError> {
        let mut plan = SlotPlan {
            cpus: Vec::new(),
            counter_of_index: Vec::with_capacity(cpus.len()),
        };
        let mut seen: Vec<u32> = Vec::new();
        for &cpu in cpus {
            if seen.contains(&cpu) {
                continue;
            }
            seen.push(cpu);
            let first = plan.counter_of_index.len() as u32;
            plan.counter_of_index
                .extend((0..cpus.len()).filter(|&i| cpus[i] == cpu));
            let count = plan.counter_of_index.len() as u32 - first;
            if count as usize > MAX_EVENTS_PER_CPU {
                return Err(EnergyError::Unusable {
                    mechanism: Mechanism::Ebpf,
                    reason: format!(
                        "cpu {cpu} has {count} energy events; the BPF program reads at most {MAX_EVENTS_PER_CPU} per CPU"
                    ),
                    fix: "restrict --domains, or use --source perf".into(),
                });
            }
            plan.cpus.push((cpu, first, count));
        }
        Ok(plan)
    }
}

/// The newest raw count of every counter, from the records of the ring buffer.
#[derive(Debug, Clone)]
pub(crate) struct NewestCounts {
    plan: SlotPlan,
    /// Per counter: the newest count.
    pub counts: Vec<u64>,
    /// Per CPU of the plan: the time of its newest record (None before the first).
    pub newest_ns: Vec<Option<u64>>,
}

impl NewestCounts {
    pub fn new(plan: SlotPlan) -> Self {
        NewestCounts {
            counts: vec![0; plan.counter_of_index.len()],
            newest_ns: vec![None; plan.cpus.len()],
            plan,
        }
    }

    pub fn plan(&self) -> &SlotPlan {
        &self.plan
    }

    /// Takes one record. A record that does not match the plan, or whose reads failed in the
    /// kernel, is an error and changes nothing; an older record than one already taken is
    /// ignored (the ring buffer orders records by their commit, not by their timestamps).
    pub fn apply(&mut self, r: &RingRecord) -> Result<(), EnergyError> {
        let Some(k) = self
            .plan
            .cpus
            .iter()
            .position(|&(cpu, first, count)| (cpu, first, count) == (r.cpu, r.first, r.count))
        else {
            return Err(EnergyError::Invalid(format!(
                "eBPF: a record for cpu {} (events {}..{}) matches no event this source opened",
                r.cpu,
                r.first,
                r.first + r.count
            )));
        };
        if r.error != 0 {
            return Err(EnergyError::Unusable {
                mechanism: Mechanism::Ebpf,
                reason: format!(
                    "bpf_perf_event_read_value failed on cpu {}: {}",
                    r.cpu,
                    std::io::Error::from_raw_os_error(-r.error)
                ),
                fix: KERNEL_FIX.into(),
            });
        }
        if self.newest_ns[k].is_some_and(|t| t > r.mono_ns) {
            return Ok(());
        }
        self.newest_ns[k] = Some(r.mono_ns);
        for j in 0..r.count as usize {
            let counter = self.plan.counter_of_index[r.first as usize + j];
            self.counts[counter] = r.counts[j];
        }
        Ok(())
    }

    /// The oldest of the CPUs' newest records (None while a CPU has none).
    pub fn oldest_newest_ns(&self) -> Option<u64> {
        self.newest_ns
            .iter()
            .try_fold(u64::MAX, |m, t| t.map(|t| m.min(t)))
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of [`RingRecord::mono_ns`] (`bpf_ktime_get_ns`).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Opens the eBPF mechanism over `pmu`'s events (optionally only `domains`).
pub(crate) fn open(
    root: &SysRoot,
    pmu: &PowerPmu,
    domains: Option<&[Domain]>,
) -> Result<Box<dyn Source>, EnergyError> {
    #[cfg(feature = "ebpf")]
    {
        bpf::EbpfSource::open(root, pmu, domains).map(|s| Box::new(s) as Box<dyn Source>)
    }
    #[cfg(not(feature = "ebpf"))]
    {
        let _ = (root, pmu, domains);
        Err(not_built())
    }
}

/// The error of a build without the feature.
pub(crate) fn not_built() -> EnergyError {
    EnergyError::Unusable {
        mechanism: Mechanism::Ebpf,
        reason: "this wattio was built without the eBPF mechanism (Cargo feature `ebpf`)".into(),
        fix: NOT_BUILT_FIX.into(),
    }
}

/// Whether this kernel lets this process load and attach the program, whatever RAPL says: a
/// note for `probe` on machines without RAPL (`Ok` = BPF itself would work).
pub(crate) fn bpf_check(root: &SysRoot) -> Result<(), EnergyError> {
    #[cfg(feature = "ebpf")]
    {
        bpf::check(root)
    }
    #[cfg(not(feature = "ebpf"))]
    {
        let _ = root;
        Err(not_built())
    }
}

/// Opens the eBPF mechanism. Where it cannot be used for want of RAPL, a note says whether BPF
/// itself would work here, so a user knows what a machine with RAPL would need.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    let (root, domains) = (req.root, req.domains);
    if !crate::ebpf::EBPF_BUILT_IN {
        return (Err(crate::ebpf::not_built()), vec![]);
    }
    let bpf_note = || {
        match crate::ebpf::bpf_check(root) {
        Ok(()) => "BPF itself works here (the program loads and attaches to a cpu-clock timer); only RAPL is missing".to_string(),
        Err(e) => format!("BPF would fail here too: {}", crate::opening::split_error(&e).0),
    }
    };
    let unusable = |reason: String| {
        crate::error::EnergyError::Unusable {
        mechanism: crate::types::Mechanism::Ebpf,
        reason,
        fix: "eBPF reads RAPL through the perf `power` PMU, which this kernel does not expose (VM, or `sudo modprobe rapl`); use --source powercap or msr".into(),
    }
    };
    match crate::perf::discover_power_pmu(root) {
        Ok(pmu) if pmu.events.is_empty() => (
            Err(unusable(
                "the power PMU advertises no usable energy event".into(),
            )),
            [pmu.notes, vec![bpf_note()]].concat(),
        ),
        Ok(pmu) => {
            let r = crate::ebpf::open(root, &pmu, domains);
            (
                r.and_then(crate::opening::check_alive)
                    .and_then(|s| crate::opening::filter(s, domains)),
                pmu.notes,
            )
        }
        Err(e) => (
            Err(unusable(format!(
                "no RAPL perf PMU: {}",
                crate::opening::split_error(&e).0
            ))),
            vec![bpf_note()],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf;

    fn reading(cpu: u32, first: u32, counts: &[u64]) -> RingRecord {
        let mut r = RingRecord {
            mono_ns: 1,
            cpu,
            first,
            count: counts.len() as u32,
            error: 0,
            counts: [0; MAX_EVENTS_PER_CPU],
        };
        r.counts[..counts.len()].copy_from_slice(counts);
        r
    }

    #[test]
    fn records_round_trip_their_bytes() {
        let mut r = reading(3, 2, &[7, u64::MAX]);
        r.error = -22;
        r.mono_ns = 123_456_789;
        let b = r.encode();
        assert_eq!(b.len(), RingRecord::SIZE);
        assert_eq!(RingRecord::decode(&b), Some(r));
        assert_eq!(RingRecord::decode(&b[..RingRecord::SIZE - 1]), None);
    }

    #[test]
    fn events_are_grouped_per_cpu_and_mapped_back_to_source_order() {
        // perf order: pkg@cpu0, pkg@cpu4, ram@cpu0, ram@cpu4.
        let plan = SlotPlan::new(&[0, 4, 0, 4]).unwrap();
        assert_eq!(plan.cpus, vec![(0, 0, 2), (4, 2, 2)]);
        assert_eq!(plan.counter_of_index, vec![0, 2, 1, 3]);
        let mut newest = NewestCounts::new(plan);
        newest.apply(&reading(4, 2, &[41, 43])).unwrap();
        assert_eq!(newest.oldest_newest_ns(), None, "cpu 0 has no record yet");
        newest.apply(&reading(0, 0, &[40, 42])).unwrap();
        assert_eq!(newest.counts, vec![40, 41, 42, 43]);
        assert_eq!(newest.oldest_newest_ns(), Some(1));
    }

    #[test]
    fn foreign_failed_and_older_records_change_nothing() {
        let mut newest = NewestCounts::new(SlotPlan::new(&[0]).unwrap());
        let mut r = reading(0, 0, &[10]);
        r.mono_ns = 100;
        newest.apply(&r).unwrap();
        let err = newest.apply(&reading(1, 0, &[11])).unwrap_err();
        assert!(err.to_string().contains("matches no event"), "{err}");
        let mut failed = reading(0, 0, &[12]);
        failed.mono_ns = 200;
        failed.error = -libc::EINVAL;
        let err = newest.apply(&failed).unwrap_err().to_string();
        assert!(
            err.contains("bpf_perf_event_read_value failed on cpu 0"),
            "{err}"
        );
        let mut older = reading(0, 0, &[9]);
        older.mono_ns = 50;
        newest.apply(&older).unwrap();
        assert_eq!(newest.counts, vec![10]);
    }

    #[test]
    fn too_many_events_on_one_cpu_is_refused_with_a_fix() {
        let err = SlotPlan::new(&[0; MAX_EVENTS_PER_CPU + 1]).unwrap_err();
        assert!(err.to_string().contains("--domains"), "{err}");
    }

    /// The RAPL events the eBPF mechanism opens are perf's selection (each event once per
    /// package on the cpumask's CPU, psys once), laid out one slice per CPU.
    #[test]
    fn rapl_event_selection_on_the_fixture_pmus_gives_one_slice_per_package_cpu() {
        let layout =
            |build: fn(&std::path::Path) -> std::io::Result<wattio_fixture::FixtureTree>,
             domains: Option<&[Domain]>| {
                let dir = tempfile::tempdir().unwrap();
                build(dir.path()).unwrap();
                let pmu = perf::discover_power_pmu(&SysRoot::new(dir.path())).unwrap();
                let slots = perf::select_events(&pmu, domains);
                let picked: Vec<(String, u32, u32)> = slots
                    .iter()
                    .map(|s| (s.event.name.clone(), s.cpu, s.socket))
                    .collect();
                let cpus: Vec<u32> = slots.iter().map(|s| s.cpu).collect();
                (picked, SlotPlan::new(&cpus).unwrap())
            };
        let own = |v: &[(&str, u32, u32)]| -> Vec<(String, u32, u32)> {
            v.iter().map(|&(n, c, s)| (n.to_string(), c, s)).collect()
        };

        // Two sockets, package and DRAM: cpu 0 reads socket 0's pair, cpu 4 socket 1's.
        let (picked, plan) = layout(wattio_fixture::intel_two_socket_server, None);
        assert_eq!(
            picked,
            own(&[
                ("energy-pkg", 0, 0),
                ("energy-pkg", 4, 1),
                ("energy-ram", 0, 0),
                ("energy-ram", 4, 1)
            ])
        );
        assert_eq!(plan.cpus, vec![(0, 0, 2), (4, 2, 2)]);
        assert_eq!(plan.counter_of_index, vec![0, 2, 1, 3]);

        // --domains dram: one event per socket.
        let (picked, plan) = layout(
            wattio_fixture::intel_two_socket_server,
            Some(&[Domain::Dram]),
        );
        assert_eq!(picked, own(&[("energy-ram", 0, 0), ("energy-ram", 4, 1)]));
        assert_eq!(plan.cpus, vec![(0, 0, 1), (4, 1, 1)]);

        // A laptop: five domains on cpu 0, psys among them once.
        let (picked, plan) = layout(wattio_fixture::intel_laptop, None);
        assert_eq!(picked.len(), 5);
        assert_eq!(picked.iter().filter(|p| p.0 == "energy-psys").count(), 1);
        assert_eq!(plan.cpus, vec![(0, 0, 5)]);

        // An AMD EPYC: package only.
        let (picked, plan) = layout(wattio_fixture::amd_epyc, None);
        assert_eq!(picked, own(&[("energy-pkg", 0, 0)]));
        assert_eq!(plan.cpus, vec![(0, 0, 1)]);
    }

    /// The u64 wrap of a perf count, through the eBPF user-space half (record bytes → newest
    /// counts) and the accumulator and spec the perf mechanism uses.
    #[test]
    fn u64_wraps_arriving_through_the_ring_buffer_are_corrected_like_perf() {
        let mut newest = NewestCounts::new(SlotPlan::new(&[0]).unwrap());
        let mut t = 0;
        perf::tests::check_u64_wrap_is_corrected(|count| {
            t += 1;
            let mut r = reading(0, 0, &[count]);
            r.mono_ns = t;
            newest
                .apply(&RingRecord::decode(&r.encode()).unwrap())
                .unwrap();
            newest.counts[0]
        });
    }
}
