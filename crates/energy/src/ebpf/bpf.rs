//! The BPF half of the eBPF mechanism: loading `bpf/rapl.bpf.c` (built by build.rs) with libbpf,
//! filling its maps, attaching it to one cpu-clock timer per package CPU, and draining its ring
//! buffer.

use super::{mono_ns, NewestCounts, RingRecord, SlotPlan, DEFAULT_HZ, KERNEL_FIX};
use crate::error::EnergyError;
use crate::perf::{self, PowerPmu};
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance};
use crate::Source;
use libbpf_rs::{MapCore, MapFlags, ObjectBuilder, RingBuffer, RingBufferBuilder};
use std::fs::File;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The program clang built from `bpf/rapl.bpf.c`.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/rapl.bpf.o"));

/// libbpf's last messages (its warnings explain a refused load); printed nowhere by default.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Keeps libbpf's messages for the errors (the task iterator loads through it too).
pub(crate) fn quiet_libbpf() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, |_, msg: String| {
            let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
            if log.len() >= 64 {
                log.remove(0);
            }
            log.push(msg.trim().trim_start_matches("libbpf: ").to_string());
        })));
    });
}

/// `e` as an [`EnergyError`] naming the step, libbpf's last message and the fix its kind calls for.
/// libbpf's last message, which says why a load was refused.
pub(crate) fn libbpf_last_message() -> Option<String> {
    if std::env::var_os("WATTIO_BPF_LOG").is_some() {
        for l in LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            eprintln!("libbpf: {l}");
        }
    }
    LIBBPF_LOG
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last()
        .cloned()
}

fn bpf_error(root: &SysRoot, step: &str, e: libbpf_rs::Error) -> EnergyError {
    let last = libbpf_last_message();
    let mut reason = format!("{step} failed: {e:#}");
    if let Some(last) = last {
        reason.push_str(&format!(" (libbpf: {last})"));
    }
    let fix = match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => perf::bpf_permission_fix(root),
        _ => KERNEL_FIX.to_string(),
    };
    EnergyError::Unusable {
        mechanism: Mechanism::Ebpf,
        reason,
        fix,
    }
}

fn map<'o>(obj: &'o libbpf_rs::Object, name: &str) -> libbpf_rs::Map<'o> {
    obj.maps()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("bpf/rapl.bpf.c defines the map {name}"))
}

/// The program loaded, with its maps sized for `n_events` events; the possible CPUs size `slots`.
fn load(root: &SysRoot, n_events: u32) -> Result<libbpf_rs::Object, EnergyError> {
    quiet_libbpf();
    let mut open = ObjectBuilder::default()
        .open_memory(OBJECT)
        .map_err(|e| bpf_error(root, "opening the BPF object", e))?;
    let possible = libbpf_rs::num_possible_cpus()
        .map_err(|e| bpf_error(root, "counting possible CPUs", e))? as u32;
    for mut m in open.maps_mut() {
        let size = match m.name().to_str() {
            Some("events") => n_events.max(1),
            Some("slots") => possible,
            _ => continue,
        };
        m.set_max_entries(size)
            .map_err(|e| bpf_error(root, "sizing the BPF maps", e))?;
    }
    open.load()
        .map_err(|e| bpf_error(root, "loading the BPF program", e))
}

/// A software cpu-clock event sampling every `period_ns` on `cpu`, disabled until attached.
fn timer_event(cpu: u32, period_ns: u64) -> std::io::Result<File> {
    use perf_event_open_sys::bindings::{
        perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE,
    };
    let mut attr = perf_event_attr::default();
    attr.type_ = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK as u64;
    attr.__bindgen_anon_1.sample_period = period_ns;
    attr.set_disabled(1);
    perf::open_event(&mut attr, cpu)
}

fn period_ns(hz: f64) -> u64 {
    (1e9 / hz).round().max(1.0) as u64
}

/// Checks that the program loads and attaches to a timer here (the probe's note where RAPL is
/// missing): a program with one empty event slot, attached to a cpu-clock timer on CPU 0 for a
/// moment.
pub(crate) fn check(root: &SysRoot) -> Result<(), EnergyError> {
    let obj = load(root, 1)?;
    let timer = timer_event(0, period_ns(DEFAULT_HZ)).map_err(|e| EnergyError::Unusable {
        mechanism: Mechanism::Ebpf,
        reason: format!("opening a cpu-clock timer failed: {e}"),
        fix: perf::permission_fix(root),
    })?;
    let prog = obj
        .progs_mut()
        .next()
        .expect("bpf/rapl.bpf.c defines one program");
    prog.attach_perf_event(timer.into_raw_fd())
        .map(drop)
        .map_err(|e| bpf_error(root, "attaching the BPF program to a cpu-clock timer", e))
}

/// One cpu-clock timer with the program attached. The link owns the perf descriptor (libbpf
/// closes it on detach); `fd` stays valid as long as the link and is used for its period.
struct Timer {
    _link: libbpf_rs::Link,
    fd: RawFd,
}

/// RAPL perf events read by the BPF program. Fields drop in order: the ring buffer before the
/// object whose map it maps, the timers (detaching the program) before the events.
pub struct EbpfSource {
    ring: RingBuffer<'static>,
    inbox: Arc<Mutex<Vec<RingRecord>>>,
    timers: Vec<Timer>,
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    newest: NewestCounts,
    period_ns: u64,
    scratch: Vec<RingRecord>,
    /// The RAPL events (also held by the program's event array), for direct reads.
    events: Vec<File>,
    object: libbpf_rs::Object,
}

impl EbpfSource {
    /// Opens every event of `pmu` (optionally only `domains`) as the perf mechanism does, loads
    /// the program and starts its timers at [`DEFAULT_HZ`].
    pub fn open(
        root: &SysRoot,
        pmu: &PowerPmu,
        domains: Option<&[Domain]>,
    ) -> Result<Self, EnergyError> {
        let open = perf::open_events(root, pmu, domains, Mechanism::Ebpf)?;
        if open.specs.is_empty() {
            return Err(EnergyError::Unusable {
                mechanism: Mechanism::Ebpf,
                reason: "no energy event could be opened".into(),
                fix: "use another --source".into(),
            });
        }
        let plan = SlotPlan::new(&open.cpus)?;
        let object = load(root, open.files.len() as u32)?;
        let update = |name: &str, key: &[u8], value: &[u8]| {
            map(&object, name)
                .update(key, value, MapFlags::ANY)
                .map_err(|e| bpf_error(root, &format!("filling the BPF map {name}"), e))
        };
        for (k, &counter) in plan.counter_of_index.iter().enumerate() {
            let fd = open.files[counter].as_raw_fd() as u32;
            update("events", &(k as u32).to_ne_bytes(), &fd.to_ne_bytes())?;
        }
        for &(cpu, first, count) in &plan.cpus {
            let value = [first.to_ne_bytes(), count.to_ne_bytes()].concat();
            update("slots", &cpu.to_ne_bytes(), &value)?;
        }

        let inbox: Arc<Mutex<Vec<RingRecord>>> = Arc::default();
        let sink = Arc::clone(&inbox);
        let readings = map(&object, "readings");
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&readings, move |data: &[u8]| {
                if let Some(r) = RingRecord::decode(data) {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                }
                0
            })
            .map_err(|e| bpf_error(root, "opening the ring buffer", e))?;
        let ring = builder
            .build()
            .map_err(|e| bpf_error(root, "opening the ring buffer", e))?;

        let period_ns = period_ns(DEFAULT_HZ);
        let prog = object
            .progs_mut()
            .next()
            .expect("bpf/rapl.bpf.c defines one program");
        let mut timers = Vec::with_capacity(plan.cpus.len());
        for &(cpu, _, _) in &plan.cpus {
            let file = timer_event(cpu, period_ns).map_err(|e| EnergyError::Unusable {
                mechanism: Mechanism::Ebpf,
                reason: format!("opening the cpu-clock timer on cpu {cpu} failed: {e}"),
                fix: perf::permission_fix(root),
            })?;
            let fd = file.into_raw_fd();
            let link = prog.attach_perf_event(fd).map_err(|e| {
                bpf_error(
                    root,
                    &format!("attaching the program to cpu {cpu}'s timer"),
                    e,
                )
            })?;
            timers.push(Timer { _link: link, fd });
        }
        Ok(EbpfSource {
            ring,
            inbox,
            timers,
            provenance: Provenance::measured(Mechanism::Ebpf),
            specs: open.specs,
            newest: NewestCounts::new(plan),
            period_ns,
            scratch: Vec::new(),
            events: open.files,
            object,
        })
    }

    /// The timer period, in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Where each counter sits in the program's event array.
    pub fn plan(&self) -> &SlotPlan {
        self.newest.plan()
    }

    /// Appends every record the program handed over since the last call, in ring-buffer order.
    pub fn drain(&mut self, out: &mut Vec<RingRecord>) -> Result<(), EnergyError> {
        self.ring.consume().map_err(|e| EnergyError::Io {
            path: "eBPF ring buffer".into(),
            err: std::io::Error::other(format!("{e:#}")),
        })?;
        out.append(&mut self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(())
    }

    /// Waits up to `timeout` for at least one record (without consuming it).
    fn wait(&self, timeout: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.ring.epoll_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; an epoll fd is readable when one of its fds is.
        unsafe {
            libc::poll(
                &mut pfd,
                1,
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
    }

    /// Ticks whose record was dropped because the ring buffer was full.
    pub fn dropped(&self) -> u64 {
        map(&self.object, "dropped")
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|v| {
                v.get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
            })
            .unwrap_or(0)
    }

    /// Reads every counter from user space, as the perf mechanism does (a `read` of each event's
    /// descriptor): the reference the kernel-side readings are checked against.
    pub fn read_directly(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        perf::read_counts(&mut self.events, &self.specs, out)
    }

    /// Drains the ring buffer into the newest counts; the first error is returned after every
    /// record is taken.
    fn take_readings(&mut self) -> Result<(), EnergyError> {
        let mut batch = std::mem::take(&mut self.scratch);
        batch.clear();
        let drained = self.drain(&mut batch);
        let mut first_err = drained.err();
        for r in &batch {
            if let Err(e) = self.newest.apply(r) {
                first_err.get_or_insert(e);
            }
        }
        self.scratch = batch;
        first_err.map_or(Ok(()), Err)
    }
}

impl Source for EbpfSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// The newest kernel reading of every counter. When a CPU's newest record is more than two
    /// ticks old (the first read, or a full ring buffer that dropped the latest ticks), waits for
    /// fresh ones, up to two ticks and 100 ms; a timer that still delivers nothing is an error.
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        self.take_readings()?;
        let patience = Duration::from_nanos(2 * self.period_ns) + Duration::from_millis(100);
        let stale_after = 2 * self.period_ns;
        let start = Instant::now();
        loop {
            let now = mono_ns();
            let fresh = self
                .newest
                .oldest_newest_ns()
                .is_some_and(|t| now.saturating_sub(t) <= stale_after);
            if fresh {
                break;
            }
            let left = patience.saturating_sub(start.elapsed());
            if left.is_zero() {
                // Nothing at all yet is an error; a reading older than two ticks is still the
                // newest count there is.
                if self.newest.oldest_newest_ns().is_some() {
                    break;
                }
                return Err(EnergyError::Unusable {
                    mechanism: Mechanism::Ebpf,
                    reason: format!(
                        "the BPF program delivered no reading in {} ms (timer at {:.1} Hz)",
                        patience.as_millis(),
                        1e9 / self.period_ns as f64
                    ),
                    fix: KERNEL_FIX.into(),
                });
            }
            self.wait(left);
            self.take_readings()?;
        }
        out.copy_from_slice(&self.newest.counts);
        Ok(())
    }

    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        if !(hz.is_finite() && hz > 0.0) {
            return Err(EnergyError::Invalid(format!(
                "eBPF timer rate must be a positive number of Hz (got {hz})"
            )));
        }
        let mut period = period_ns(hz);
        for t in &self.timers {
            // SAFETY: t.fd is the open perf descriptor its link owns; the kernel reads one u64.
            let r = unsafe {
                libc::ioctl(
                    t.fd,
                    perf_event_open_sys::bindings::PERIOD as _,
                    &mut period as *mut u64,
                )
            };
            if r < 0 {
                return Err(EnergyError::Unusable {
                    mechanism: Mechanism::Ebpf,
                    reason: format!(
                        "setting the timer period to {period} ns failed: {}",
                        std::io::Error::last_os_error()
                    ),
                    fix: KERNEL_FIX.into(),
                });
            }
        }
        self.period_ns = period;
        Ok(())
    }
}
