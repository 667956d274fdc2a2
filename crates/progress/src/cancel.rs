//! The cancel flag a long-running library (a study, a benchmark loop) checks between runs and
//! waits on during one.
//!
//! A flag alone would leave a runner asleep in an idle window or blocked on a workload until
//! it ends; polling it would add wake-ups to the very runs being timed. So the flag comes with
//! a pipe: [`Cancel::set`] also writes one byte, and the waits here block in `poll(2)` on that
//! pipe (and, for a child, on its pidfd; for a timer or a socket, on its descriptor), waking
//! only when the wait is over or the study is cancelled. The binary owns the signal handling
//! and calls [`Cancel::set`]; libraries never install handlers.

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A cancel flag that waits can block on. Shared between the thread that cancels (the
/// binary's signal thread) and the library's loop, usually behind an `Arc`.
#[derive(Debug)]
pub struct Cancel {
    flag: AtomicBool,
    wake_read: OwnedFd,
    wake_write: OwnedFd,
}

/// How a [`Cancel::wait_exit`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The child exited; it is not reaped yet (reap it with `wait4` for its rusage).
    Exited,
    /// The study was cancelled first; the child is still running.
    Cancelled,
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: d.subsec_nanos().into(),
    }
}

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> io::Result<Cancel> {
        let (wake_read, wake_write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        Ok(Cancel {
            flag: AtomicBool::new(false),
            wake_read,
            wake_write,
        })
    }

    /// Cancels: sets the flag and wakes every wait. Only an atomic store and a `write(2)`,
    /// so it may be called from any thread.
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        // The pipe is never drained: once written it stays readable, so every later wait
        // returns at once. A full pipe (EAGAIN) is already readable.
        let _ = rustix::io::write(&self.wake_write, &[1]);
    }

    /// Whether [`Cancel::set`] was called.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Blocks on the wake pipe (and `extra`) for at most `timeout` (`None`: no limit);
    /// returns whether `extra` became readable.
    fn block(&self, extra: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> io::Result<bool> {
        let mut fds = vec![PollFd::new(&self.wake_read, PollFlags::IN)];
        if let Some(fd) = &extra {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        let ts = timeout.map(timespec);
        match poll(&mut fds, ts.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(fds.get(1).is_some_and(|f| !f.revents().is_empty()))
    }

    /// Sleeps for `d` unless cancelled first; returns whether it was cancelled.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            if self.is_set() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // A failed poll (it cannot fail on a valid pipe) falls back to a plain sleep.
            if self.block(None, Some(left)).is_err() {
                std::thread::sleep(left);
            }
        }
    }

    /// Waits until `fd` is readable (a timerfd expired, a listener has a connection) or the
    /// flag is set, for at most `timeout` (`None`: no limit). Returns whether `fd` is readable:
    /// `false` means cancelled or timed out ([`Cancel::is_set`] tells which). One `poll(2)` on
    /// both, so a loop that waits on its own descriptor needs no timeout to notice a cancel.
    pub fn wait_readable(&self, fd: impl AsFd, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if self.is_set() {
                return Ok(false);
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if self.block(Some(fd.as_fd()), left)? {
                return Ok(true);
            }
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(false);
            }
        }
    }

    /// Waits until our un-reaped child `pid` exits or the study is cancelled, without
    /// reaping it. Blocks on the child's pidfd (Linux 5.3+); where there is none, checks with
    /// `waitid(WNOWAIT)` every 10 ms.
    pub fn wait_exit(&self, pid: u32) -> io::Result<Waited> {
        let raw = i32::try_from(pid).ok().and_then(Pid::from_raw);
        let pidfd = raw.and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
        loop {
            if self.is_set() {
                return Ok(Waited::Cancelled);
            }
            match &pidfd {
                Some(fd) => {
                    if self.block(Some(fd.as_fd()), None)? {
                        return Ok(Waited::Exited);
                    }
                }
                None => {
                    if exited_unreaped(pid)? {
                        return Ok(Waited::Exited);
                    }
                    self.block(None, Some(Duration::from_millis(10)))?;
                }
            }
        }
    }
}

/// Whether child `pid` has exited, leaving it waitable (`waitid(P_PID, WEXITED | WNOHANG |
/// WNOWAIT)`).
fn exited_unreaped(pid: u32) -> io::Result<bool> {
    let raw = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    let status = rustix::process::waitid(
        rustix::process::WaitId::Pid(raw),
        rustix::process::WaitIdOptions::EXITED
            | rustix::process::WaitIdOptions::NOHANG
            | rustix::process::WaitIdOptions::NOWAIT,
    )?;
    Ok(status.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::Arc;

    #[test]
    fn sleep_runs_its_course_unless_cancelled() {
        let c = Arc::new(Cancel::new().unwrap());
        let t0 = Instant::now();
        assert!(!c.sleep(Duration::from_millis(30)));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        let c2 = Arc::clone(&c);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.set();
        });
        let t0 = Instant::now();
        assert!(c.sleep(Duration::from_secs(30)), "woken by set()");
        assert!(t0.elapsed() < Duration::from_secs(10));
        setter.join().unwrap();
        assert!(c.is_set());
        // Set stays set: later waits return at once.
        assert!(c.sleep(Duration::from_secs(30)));
    }

    #[test]
    fn wait_exit_sees_the_exit_without_reaping_and_stops_on_cancel() {
        let c = Arc::new(Cancel::new().unwrap());
        let mut child = Command::new("sleep").arg("0.05").spawn().unwrap();
        assert_eq!(c.wait_exit(child.id()).unwrap(), Waited::Exited);
        // Still ours to reap.
        assert!(child.wait().unwrap().success());

        let mut long = Command::new("sleep").arg("30").spawn().unwrap();
        let c2 = Arc::clone(&c);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.set();
        });
        assert_eq!(c.wait_exit(long.id()).unwrap(), Waited::Cancelled);
        setter.join().unwrap();
        long.kill().unwrap();
        long.wait().unwrap();
    }

    #[test]
    fn wait_readable_wakes_on_data_on_timeout_and_on_cancel() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let c = Arc::new(Cancel::new().unwrap());
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let t0 = Instant::now();
        assert!(!c
            .wait_readable(&rx, Some(Duration::from_millis(30)))
            .unwrap());
        assert!(t0.elapsed() >= Duration::from_millis(30), "ran its course");
        assert!(!c.is_set(), "a timeout is not a cancel");
        tx.write_all(b"x").unwrap();
        assert!(c.wait_readable(&rx, None).unwrap(), "data is there");

        let (_tx, idle) = UnixStream::pair().unwrap();
        let c2 = Arc::clone(&c);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.set();
        });
        let t0 = Instant::now();
        assert!(!c.wait_readable(&idle, None).unwrap(), "woken by set()");
        assert!(t0.elapsed() < Duration::from_secs(10));
        setter.join().unwrap();
        assert!(c.is_set());
    }

    #[test]
    fn the_fallback_check_sees_an_exit() {
        let mut child = Command::new("true").spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !exited_unreaped(child.id()).unwrap() {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(child.wait().unwrap().success());
    }
}
