//! Children a study starts, each in its own process group.
//!
//! Ctrl-C in a terminal sends SIGINT to the whole foreground process group: a workload,
//! recorder or JVM in wattio's group would die mid-run with a signal before the study could
//! stop cleanly. In a group of their own they only hear from the study, which ends them
//! (and their own children: JMH's forked JVMs, stress-ng's workers) as a group when it is
//! cancelled or fails, so nothing outlives it.

use rustix::process::{kill_process_group, Pid, Signal};
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// A child leading its own process group; dropping it kills the group with SIGKILL and
/// reaps the child, unless it was taken back with [`GroupChild::into_child`].
#[derive(Debug)]
pub struct GroupChild {
    child: Option<Child>,
}

impl GroupChild {
    /// Spawns `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> io::Result<GroupChild> {
        let child = cmd.process_group(0).spawn()?;
        Ok(GroupChild { child: Some(child) })
    }

    /// The child's pid (= its process group id).
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The child, for `try_wait` and friends.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("taken only by into_child")
    }

    /// Sends `sig` to every process of the group (ESRCH, a group already gone, is fine).
    pub fn signal_group(&self, sig: Signal) -> io::Result<()> {
        let Some(pid) = i32::try_from(self.id()).ok().and_then(Pid::from_raw) else {
            return Ok(());
        };
        match kill_process_group(pid, sig) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits for the child (its status at once if `try_wait` already reaped it), leaving the
    /// rest of its group alone.
    pub fn wait(mut self) -> io::Result<std::process::ExitStatus> {
        self.child.take().expect("taken only once").wait()
    }

    /// The child, no longer killed on drop (to reap it with `wait4` for its rusage).
    pub fn into_child(mut self) -> Child {
        self.child.take().expect("taken only once")
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.signal_group(Signal::KILL);
        }
        if let Some(c) = self.child.as_mut() {
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: u32) -> bool {
        // Signal 0 checks existence; a zombie still exists, so look at its state too.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !stat.is_empty()
            && stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    }

    #[test]
    fn dropping_kills_the_whole_group_and_reaps_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let g = GroupChild::spawn(&mut cmd).unwrap();
        let leader = g.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let grandchild: u32 = loop {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the shell never started sleep");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(alive(grandchild));
        drop(g);
        assert!(!alive(leader), "leader reaped");
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(grandchild) {
            assert!(
                Instant::now() < deadline,
                "grandchild {grandchild} survived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn into_child_and_wait_disarm_the_guard() {
        let g = GroupChild::spawn(&mut Command::new("true")).unwrap();
        let mut c = g.into_child();
        assert!(c.wait().unwrap().success());
        let mut g = GroupChild::spawn(&mut Command::new("false")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while g.child_mut().try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(g.wait().unwrap().code(), Some(1));
    }
}
