//! Which virtual machine a host process belongs to, named as the host names it: the link
//! between the attribution layer's per-process shares and `--by vm`.
//!
//! * libvirt puts each QEMU domain in a systemd scope `machine.slice/machine-qemu\x2dN\x2dNAME.scope`
//!   (N the domain id, NAME the domain name with systemd's escaping: `-` as `\x2d`, and so on;
//!   libvirt's `vcpuN`, `emulator` and `iothreadN` sub-cgroups lie below it): the VM is NAME.
//!   `systemd.unit(5)` and `systemd-escape(1)` give the escaping; libvirt's cgroup layout is in
//!   <https://libvirt.org/cgroups.html>.
//! * Proxmox VE puts each VM in `qemu.slice/VMID.scope`: the VM is VMID.
//! * A plain `qemu-system-*` (or `qemu-kvm`) process is its own VM, named by its `-name` option
//!   (`-name guest=NAME,…` or `-name NAME`), else `qemu-PID`.
//! * A vhost worker (`vhost-PID`: the kernel's thread moving a virtio device's data for QEMU
//!   process PID) belongs to that process's VM. Since Linux 6.4 these are threads of the QEMU
//!   process itself, which its own CPU time already counts.
//!
//! What this misses: work the kernel does for a VM in threads outside its cgroup and not named
//! after it (softirq network processing on other CPUs, block I/O completions, KVM's own
//! housekeeping threads such as `kvm-nx-lpage-recovery`), which stays in the host's share.

use super::cgroup;
use super::cputime;
use crate::SysRoot;

/// The VM of cgroup `path`, by libvirt's or Proxmox's naming, if any.
pub fn vm_of_cgroup(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let unit = unescape_systemd(part);
        if let Some(rest) = unit
            .strip_prefix("machine-qemu-")
            .and_then(|r| r.strip_suffix(".scope"))
        {
            // machine-qemu-ID-NAME (libvirt ≥ 1.3), or machine-qemu-NAME before it.
            let name = match rest.split_once('-') {
                Some((id, name)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
                    name
                }
                _ => rest,
            };
            if !name.is_empty() {
                return Some(name.to_string());
            }
        }
        if i > 0 && parts[i - 1] == "qemu.slice" {
            if let Some(id) = part.strip_suffix(".scope") {
                if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                    return Some(id.to_string());
                }
            }
        }
    }
    None
}

/// systemd's unit-name unescaping: `\xHH` is the byte HH (names are UTF-8; an invalid escape
/// stays as written).
pub fn unescape_systemd(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 2]), hex(b[i + 3])) {
                out.push((h * 16 + l) as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `comm` (at most 15 bytes, as `/proc/PID/stat` gives it) is a QEMU system emulator.
pub fn is_qemu(comm: &str) -> bool {
    comm.starts_with("qemu-system") || comm == "qemu-kvm"
}

/// The guest name of a QEMU command line (its arguments, as `/proc/PID/cmdline` splits them):
/// `-name guest=NAME,…`, or `-name NAME[,…]`. QEMU doubles a comma that belongs to a value.
pub fn qemu_guest_name(args: &[String]) -> Option<String> {
    let i = args.iter().position(|a| a == "-name" || a == "--name")?;
    let value = args.get(i + 1)?;
    // Split at single commas, keeping doubled ones as one comma.
    let mut items = vec![String::new()];
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                items.last_mut().expect("one item at least").push(',');
            } else {
                items.push(String::new());
            }
        } else {
            items.last_mut().expect("one item at least").push(c);
        }
    }
    if let Some(g) = items.iter().find_map(|it| it.strip_prefix("guest=")) {
        return (!g.is_empty()).then(|| g.to_string());
    }
    let first = &items[0];
    (!first.is_empty() && !first.contains('=')).then(|| first.clone())
}

/// The QEMU process a vhost worker works for (`vhost-PID`).
pub fn vhost_owner(comm: &str) -> Option<u32> {
    comm.strip_prefix("vhost-")?.parse().ok()
}

/// The VM of process `pid` (with `comm` and cgroup `cgroup`, as already read): its cgroup's,
/// else its own QEMU command line's, else, for a vhost worker, its QEMU process's.
pub fn vm_of_process(root: &SysRoot, pid: u32, comm: &str, cgroup: Option<&str>) -> Option<String> {
    if let Some(vm) = cgroup.and_then(vm_of_cgroup) {
        return Some(vm);
    }
    if is_qemu(comm) {
        return Some(qemu_process_name(root, pid));
    }
    let owner = vhost_owner(comm)?;
    let st = cputime::read_proc_stat(root, owner).ok()?;
    if let Some(vm) = cgroup::cgroup_of(root, owner)
        .as_deref()
        .and_then(vm_of_cgroup)
    {
        return Some(vm);
    }
    is_qemu(&st.comm).then(|| qemu_process_name(root, owner))
}

/// A plain QEMU process's VM name: its `-name`, else `qemu-PID`.
fn qemu_process_name(root: &SysRoot, pid: u32) -> String {
    std::fs::read(root.path(format!("/proc/{pid}/cmdline")))
        .ok()
        .and_then(|raw| {
            let args: Vec<String> = raw
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            qemu_guest_name(&args)
        })
        .unwrap_or_else(|| format!("qemu-{pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libvirt_scopes_name_their_domain_with_escapes_undone() {
        assert_eq!(
            vm_of_cgroup(
                "/machine.slice/machine-qemu\\x2d3\\x2dweb\\x2dfrontend.scope/libvirt/vcpu0"
            ),
            Some("web-frontend".into())
        );
        assert_eq!(
            vm_of_cgroup("/machine.slice/machine-qemu\\x2d12\\x2ddb.scope"),
            Some("db".into())
        );
        // Before libvirt 1.3 the id was not in the name.
        assert_eq!(
            vm_of_cgroup("/machine.slice/machine-qemu\\x2dold.scope"),
            Some("old".into())
        );
        // A name with a dot and a non-ASCII letter, escaped by systemd.
        assert_eq!(
            vm_of_cgroup(
                "/machine.slice/machine-qemu\\x2d1\\x2dv1\\x2e2\\x2d\\xc3\\xa9t\\xc3\\xa9.scope"
            ),
            Some("v1.2-été".into())
        );
        assert_eq!(vm_of_cgroup("/system.slice/libvirtd.service"), None);
        assert_eq!(vm_of_cgroup("/"), None);
    }

    #[test]
    fn proxmox_scopes_name_their_vmid() {
        assert_eq!(vm_of_cgroup("/qemu.slice/101.scope"), Some("101".into()));
        assert_eq!(
            vm_of_cgroup("/qemu.slice/101.scope/vcpu0"),
            Some("101".into())
        );
        assert_eq!(vm_of_cgroup("/qemu.slice/pve-guests.service"), None);
        assert_eq!(vm_of_cgroup("/user.slice/101.scope"), None);
    }

    #[test]
    fn qemu_command_lines_name_their_guest() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            qemu_guest_name(&args(
                "qemu-system-x86_64 -m 1G -name guest=alpha,debug-threads=on -S"
            )),
            Some("alpha".into())
        );
        assert_eq!(
            qemu_guest_name(&args("qemu-system-x86_64 -name beta -m 1G")),
            Some("beta".into())
        );
        assert_eq!(
            qemu_guest_name(&args("qemu-system-x86_64 -name gamma,,one,process=q")),
            Some("gamma,one".into())
        );
        assert_eq!(qemu_guest_name(&args("qemu-system-x86_64 -m 1G")), None);
        assert_eq!(qemu_guest_name(&args("qemu-system-x86_64 -name")), None);
        assert!(is_qemu("qemu-system-x86") && is_qemu("qemu-kvm") && !is_qemu("qemu-img"));
        assert_eq!(vhost_owner("vhost-4242"), Some(4242));
        assert_eq!(vhost_owner("vhost-net"), None);
    }
}
