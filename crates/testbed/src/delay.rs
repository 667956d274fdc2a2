//! The delay line: a timed FIFO per direction between two packet fds (the two TUN devices).
//!
//! Each packet is stamped when it is read and written out once `delay` has passed, in arrival
//! order. The rate limit is not applied here: TBF on each TUN egress already paces what the
//! kernel hands to the device, so the delay line only adds propagation delay (the order
//! "serialise, then propagate" of a real link).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters of one direction, readable while it runs.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Packets forwarded.
    pub packets: AtomicU64,
    /// Bytes forwarded.
    pub bytes: AtomicU64,
    /// Packets dropped because the queue was full or the output refused them.
    pub dropped: AtomicU64,
}

/// Settings of one direction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Direction {
    /// One-way delay added to every packet.
    pub delay: Duration,
    /// Bytes the FIFO may hold before it drops (guards memory if the output stalls; sized well
    /// above the BDP so it never binds in normal operation).
    pub max_queue_bytes: usize,
    /// Largest packet (the MTU); reads use buffers this big.
    pub max_packet: usize,
}

/// Longest a poll may sleep, so `stop` is noticed promptly.
const TICK: Duration = Duration::from_millis(50);
/// Packets read per wake-up before due packets are sent again.
const BATCH: usize = 64;

/// Forwards packets from `input` to `output` after `dir.delay`, until `stop` is set.
///
/// Both fds must be packet-oriented (TUN devices, or `SOCK_SEQPACKET` sockets in tests) and
/// `input` must be non-blocking.
pub(crate) fn run(
    input: BorrowedFd<'_>,
    output: BorrowedFd<'_>,
    dir: Direction,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    // Default timer slack is 50 µs; 1 µs keeps the release time close to the deadline.
    // SAFETY: prctl(PR_SET_TIMERSLACK) only affects this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0, 0, 0) };
    let mut queue: VecDeque<(Instant, Vec<u8>, usize)> = VecDeque::new();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut queued = 0usize;
    let bufsize = dir.max_packet + 64;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while queue.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, buf, len) = queue.pop_front().expect("front checked");
            queued -= len;
            // SAFETY: buf holds len initialised bytes; output is a valid fd.
            let n = unsafe { libc::write(output.as_raw_fd(), buf.as_ptr().cast(), len) };
            if n == len as isize {
                counters.packets.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(len as u64, Ordering::Relaxed);
            } else {
                counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
            pool.push(buf);
        }
        let wait = queue
            .front()
            .map_or(TICK, |(t, _, _)| t.saturating_duration_since(now))
            .min(TICK);
        let mut pfd = libc::pollfd {
            fd: input.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(io::Error::other("delay line input failed (device gone?)"));
        }
        if pfd.revents & libc::POLLHUP != 0 && pfd.revents & libc::POLLIN == 0 {
            return Ok(()); // peer closed (tests); a TUN device never hangs up
        }
        if r == 0 {
            continue;
        }
        for _ in 0..BATCH {
            let mut buf = pool.pop().unwrap_or_else(|| vec![0u8; bufsize]);
            // SAFETY: buf has bufsize writable bytes; input is a valid fd.
            let n = unsafe { libc::read(input.as_raw_fd(), buf.as_mut_ptr().cast(), bufsize) };
            if n <= 0 {
                pool.push(buf);
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => break,
                        _ => return Err(e),
                    }
                }
                break; // EOF: only socket peers in tests
            }
            let len = n as usize;
            if queued + len > dir.max_queue_bytes {
                counters.dropped.fetch_add(1, Ordering::Relaxed);
                pool.push(buf);
                continue;
            }
            queued += len;
            queue.push_back((Instant::now() + dir.delay, buf, len));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    use std::sync::Arc;

    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: socketpair fills two fds on success.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0, "socketpair: {}", io::Error::last_os_error());
        // SAFETY: both fds are fresh and owned here.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn set_nonblocking(fd: &OwnedFd) {
        // SAFETY: fcntl on a valid fd.
        unsafe {
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }

    fn send(fd: &OwnedFd, data: &[u8]) {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        assert_eq!(n, data.len() as isize);
    }

    fn recv(fd: &OwnedFd) -> Vec<u8> {
        let mut buf = vec![0u8; 70000];
        // SAFETY: valid fd and buffer (blocking read).
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(n >= 0, "read: {}", io::Error::last_os_error());
        buf.truncate(n as usize);
        buf
    }

    /// Runs a delay line between two socket pairs; returns (sender, receiver, stop, counters, join).
    fn line(
        dir: Direction,
    ) -> (
        OwnedFd,
        OwnedFd,
        Arc<AtomicBool>,
        Arc<Counters>,
        std::thread::JoinHandle<io::Result<()>>,
    ) {
        let (tx_user, in_engine) = seqpacket_pair();
        let (out_engine, rx_user) = seqpacket_pair();
        set_nonblocking(&in_engine);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let (s, c) = (stop.clone(), counters.clone());
        let h = std::thread::spawn(move || run(in_engine.as_fd(), out_engine.as_fd(), dir, &s, &c));
        (tx_user, rx_user, stop, counters, h)
    }

    #[test]
    fn packets_arrive_intact_in_order_and_not_before_the_delay() {
        let delay = Duration::from_millis(30);
        let dir = Direction {
            delay,
            max_queue_bytes: 1 << 20,
            max_packet: 9000,
        };
        let (tx, rx, stop, counters, h) = line(dir);
        let sent: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 100 + i as usize * 300]).collect();
        let t0 = Instant::now();
        for p in &sent {
            send(&tx, p);
        }
        for p in &sent {
            let got = recv(&rx);
            assert_eq!(&got, p, "packet changed or reordered");
        }
        // The first packet was written before t0 + ε, so nothing can legally arrive before t0 + delay.
        assert!(
            t0.elapsed() >= delay,
            "arrived after {:?}, before the {delay:?} delay",
            t0.elapsed()
        );
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().unwrap();
        assert_eq!(counters.packets.load(Ordering::Relaxed), 20);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 0);
        let total: usize = sent.iter().map(Vec::len).sum();
        assert_eq!(counters.bytes.load(Ordering::Relaxed), total as u64);
    }

    #[test]
    fn each_packet_is_held_for_the_delay_not_just_the_first() {
        let delay = Duration::from_millis(40);
        let dir = Direction {
            delay,
            max_queue_bytes: 1 << 20,
            max_packet: 1500,
        };
        let (tx, rx, stop, _c, h) = line(dir);
        for i in 0..3u8 {
            let t = Instant::now();
            send(&tx, &[i; 64]);
            assert_eq!(recv(&rx), vec![i; 64]);
            assert!(
                t.elapsed() >= delay,
                "packet {i} took only {:?}",
                t.elapsed()
            );
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().unwrap();
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_growing() {
        // Room for 3 packets of 1000 bytes held for a long time: the rest are dropped.
        let dir = Direction {
            delay: Duration::from_millis(300),
            max_queue_bytes: 3000,
            max_packet: 1500,
        };
        let (tx, rx, stop, counters, h) = line(dir);
        for i in 0..10u8 {
            send(&tx, &[i; 1000]);
        }
        for i in 0..3u8 {
            assert_eq!(recv(&rx), vec![i; 1000]);
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().unwrap();
        assert_eq!(counters.packets.load(Ordering::Relaxed), 3);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 7);
    }
}
