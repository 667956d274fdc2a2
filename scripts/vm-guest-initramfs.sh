#!/usr/bin/env bash
# Builds the initramfs of a minimal guest that measures a command with wattio's `host`
# mechanism: Debian's static busybox, a wattio binary with the shared libraries it needs, the
# modules of the host's Debian kernel package that virtio and 9p need, and an /init that mounts
# the 9p share tagged `wattio` at /run/wattio-host, prints WATTIO-READY, waits for the host's
# files to appear there, runs
#     wattio measure --source host --json -- timeout SECONDS sh -c 'while :; do :; done'
# (or `sleep SECONDS` with WORKLOAD idle) between the console lines WATTIO-START and WATTIO-END,
# prints its JSON between WATTIO-JSON-BEGIN and WATTIO-JSON-END, and powers off. WORKLOAD
# lifecycle spins (printing WATTIO-RUNNING once its wattio has opened the share), then, after
# WATTIO-ORPHAN, measures `sleep 2×SECONDS` (printing WATTIO-OPENED as it starts), prints its exit status as WATTIO-RC N and its error, and its `probe --json`
# between WATTIO-PROBE-BEGIN and WATTIO-PROBE-END. Where the VM also has a 9p share tagged
# `scaph` (Scaphandre's qemu exporter's tree, scripts/compare-vm-meters.py), it is mounted at
# /run/scaph, waited for too, and both counters are printed as `WATTIO-COUNTERS WATTIO_UJ
# SCAPH_UJ` just before WATTIO-START and just after WATTIO-END. No disk image, no network: boots
# in seconds under TCG.
#
# WORKLOAD kernel-io is another guest: the kernel's I/O work charged by cgroup (crates/cli/tests/
# vm_kernel_io.rs). It mounts a pure cgroup v2 hierarchy with the io and memory controllers on
# (cgroup writeback), makes an ext2 file system on the virtio disk /dev/vda, and, once with
# WATTIO_KERNEL_IO=bpf and once with bytes (the io.stat rule), runs `wattio record --by cgroup`
# while a cgroup `writer` writes SECONDS×16 MiB to it and syncs and a cgroup `neighbour` spins,
# printing each recording between WATTIO-BPF-BEGIN/END and WATTIO-BYTES-BEGIN/END.
#
# WORKLOAD ipmi is a guest with a BMC (QEMU's ipmi-bmc-sim behind an ISA KCS interface,
# crates/cli/tests/vm_ipmi.rs): it loads the kernel's IPMI drivers (ipmi_msghandler, ipmi_si,
# ipmi_devintf), waits for /dev/ipmi0, and prints `wattio probe` between WATTIO-PROBE-BEGIN and
# WATTIO-PROBE-END and `wattio measure --domains platform -- true` between WATTIO-MEASURE-BEGIN
# and WATTIO-MEASURE-END, with its exit status as WATTIO-RC N. No share, no disk.
#
# WORKLOAD devices is a guest with an emulated NVMe drive and an AHCI disk (crates/cli/tests/
# vm_devices.rs): it loads their drivers, waits for /dev/nvme0 and /dev/sda, and prints
# `wattio probe --json` between WATTIO-PROBE-BEGIN/END; `wattio measure --json` of a direct
# write of SECONDS×8 MiB to /dev/nvme0n1 between WATTIO-MEASURE-BEGIN/END; a dry-run
# `wattio power run --dry-run` over 2×SECONDS s while the AHCI disk is read and then left idle, between
# WATTIO-POWER-BEGIN/END; and, for each of nvme0n1 and sda, `wattio power run --apply` for 2 s
# between WATTIO-APPLY-DEV-BEGIN/END, with the knobs before and after (WATTIO-KNOBS) and what
# is left in /var/lib/wattio. Each command's exit status is printed as WATTIO-RC NAME N.
#
# usage: scripts/vm-guest-initramfs.sh OUT.cpio.gz WATTIO_BIN KERNEL_VERSION [SECONDS [spin|idle|lifecycle|kernel-io|ipmi|devices]]
# (crates/cli/tests/vm_e2e.rs builds one; qemu-system-x86_64 -kernel /boot/vmlinuz-VERSION
#  -initrd OUT.cpio.gz -append console=ttyS0 -virtfs local,path=DIR,mount_tag=wattio,… boots it)
set -euo pipefail

die() {
    echo "vm-guest-initramfs: $*" >&2
    exit 2
}

[ $# -ge 3 ] || die "usage: $0 OUT.cpio.gz WATTIO_BIN KERNEL_VERSION [SECONDS [spin|idle|lifecycle|kernel-io|ipmi|devices]]"
out=$(realpath -m "$1")
bin=$2
kver=$3
seconds=${4:-3}
after=""
case ${5:-spin} in
spin) workload="timeout $seconds sh -c 'while :; do :; done'" ;;
idle) workload="sleep $seconds" ;;
lifecycle)
    # The measured command runs once wattio has opened the share: its marks say so.
    workload="sh -c 'echo WATTIO-RUNNING >/dev/console; exec timeout $seconds sh -c \"while :; do :; done\"'"
    after="echo WATTIO-ORPHAN
wattio measure --source host --json -- sh -c 'echo WATTIO-OPENED >/dev/console; exec sleep $((2 * seconds))' >/tmp/orphan.json 2>/tmp/orphan.txt
echo WATTIO-RC \$?
cat /tmp/orphan.txt
echo WATTIO-PROBE-BEGIN
wattio probe --json
echo WATTIO-PROBE-END"
    ;;
kernel-io | ipmi | devices) ;;
*) die "workload must be spin, idle, lifecycle, kernel-io, ipmi or devices, not $5" ;;
esac
mode=${5:-spin}
busybox=$(command -v busybox) || die "busybox not found: apt-get install busybox-static"
# ldd fails on a static binary, saying so.
{ ldd "$busybox" 2>&1 || true; } | grep -q "not a dynamic executable" ||
    die "$busybox is not static: apt-get install busybox-static"
[ -x "$bin" ] || die "no wattio binary at $bin"
[ -d "/lib/modules/$kver" ] || die "no modules for kernel $kver: apt-get install linux-image-amd64"
command -v cpio >/dev/null || die "cpio not found: apt-get install cpio"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,usr/bin,proc,sys,dev,run/wattio-host,run/scaph,modules,tmp,mnt}
cp "$busybox" "$root/bin/busybox"
# The binary without its debug information (a tenth of the size), and every library it loads.
strip -o "$root/usr/bin/wattio" "$bin" 2>/dev/null || cp "$bin" "$root/usr/bin/wattio"
for lib in $(ldd "$bin" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

# virtio-pci and 9p over virtio, in dependency order.
: >"$root/modules.order"
# Helpers that newer kernels merged into others (fscache into netfs; crc32c into the crypto
# library) or built in may be absent.
modules="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p"
# The disk and its file system (ext2 through the ext4 driver, as Debian builds it).
[ "$mode" = kernel-io ] && modules="$modules virtio_blk crc16 crc32c_generic mbcache jbd2 ext4"
# The BMC's guest needs the IPMI drivers alone: the message handler, the system interface
# driver (KCS, found through the ACPI table QEMU writes) and the device interface (/dev/ipmi0).
[ "$mode" = ipmi ] && modules="ipmi_msghandler ipmi_si ipmi_devintf"
# The devices' guest: an NVMe controller and an AHCI disk, each with its kernel driver (the
# T10 protection-information helpers first: nvme-core and sd_mod need them).
[ "$mode" = devices ] && modules="crct10dif_common crc_t10dif crc64 crc64_rocksoft t10_pi nvme_core nvme scsi_common scsi_mod libata libahci ahci sd_mod"
for m in $modules; do
    if ! f=$(modinfo -n -k "$kver" "$m" 2>/dev/null); then
        case $m in
        virtio_pci_legacy_dev | virtio_pci_modern_dev | netfs | fscache | crc16 | crc32c_generic | mbcache | crct10dif_common | crc64 | crc64_rocksoft) continue ;;
        *) die "module $m not found for $kver" ;;
        esac
    fi
    case $f in
    *.ko) cp "$f" "$root/modules/$m.ko" ;;
    *.ko.xz) xz -dc "$f" >"$root/modules/$m.ko" ;;
    *.ko.zst) zstd -dcq "$f" >"$root/modules/$m.ko" ;;
    (builtin) continue ;;
    *) die "module $m: unexpected file $f" ;;
    esac
    echo "$m.ko" >>"$root/modules.order"
done
# The devices' guest tells libata that its disk cannot do link power management (busybox's
# insmod takes a module's parameters itself, not from the kernel command line), so the guest
# kernel refuses wattio's link-policy write (EOPNOTSUPP: drivers/ata/libata-sata.c).
[ "$mode" = devices ] && echo "force=nolpm" >"$root/modules/libata.ko.params"

# Both guests start alike: busybox's commands, the kernel's file systems, the modules.
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in \$(cat /modules.order); do insmod /modules/\$m \$(cat /modules/\$m.params 2>/dev/null) || echo "WATTIO-ERROR insmod \$m"; done
EOF
if [ "$mode" = devices ]; then
    cat >>"$root/init" <<EOF
i=0
while { [ ! -c /dev/nvme0 ] || [ ! -b /dev/sda ]; } && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i+1)); done
[ -c /dev/nvme0 ] || echo "WATTIO-ERROR no /dev/nvme0"
[ -b /dev/sda ] || echo "WATTIO-ERROR no /dev/sda"
knobs() {
    echo "WATTIO-KNOBS \$1 \$(cat /sys/class/scsi_host/host*/link_power_management_policy 2>/dev/null | tr '\\n' ' ')\$(cat /sys/bus/pci/devices/*/power/control | tr '\\n' ' ')"
}
echo WATTIO-READY
echo WATTIO-PROBE-BEGIN
wattio probe --json
echo WATTIO-PROBE-END
echo WATTIO-MEASURE-BEGIN
wattio measure --source model --json -- dd if=/dev/zero of=/dev/nvme0n1 bs=1M count=$((seconds * 8)) oflag=direct 2>/tmp/measure.err
echo WATTIO-RC measure \$?
echo WATTIO-MEASURE-END
cat /tmp/measure.err
echo WATTIO-POWER-BEGIN
knobs before
(dd if=/dev/sda of=/dev/null bs=1M count=16 iflag=direct 2>/dev/null) &
wattio power run --dry-run --idle-timeout 1 --interval 0.2 --duration $((seconds * 2)) 2>&1
echo WATTIO-RC power \$?
knobs after
echo WATTIO-POWER-END
for dev in nvme0n1 sda; do
    echo WATTIO-APPLY-\$dev-BEGIN
    knobs before
    wattio power run --apply --device \$dev --idle-timeout 0.5 --interval 0.1 --duration 2 2>&1
    echo WATTIO-RC apply-\$dev \$?
    knobs after
    ls /var/lib/wattio 2>/dev/null
    echo WATTIO-APPLY-\$dev-END
done
poweroff -f
EOF
elif [ "$mode" = ipmi ]; then
    cat >>"$root/init" <<EOF
i=0
while [ ! -c /dev/ipmi0 ] && [ \$i -lt 200 ]; do sleep 0.1; i=\$((i+1)); done
[ -c /dev/ipmi0 ] || echo "WATTIO-ERROR no /dev/ipmi0"
echo WATTIO-READY
echo WATTIO-PROBE-BEGIN
wattio probe 2>&1
echo WATTIO-PROBE-END
echo WATTIO-MEASURE-BEGIN
wattio measure --domains platform -- true 2>&1
echo WATTIO-RC \$?
echo WATTIO-MEASURE-END
poweroff -f
EOF
elif [ "$mode" = kernel-io ]; then
    mib=$((seconds * 16))
    cat >>"$root/init" <<EOF
mount -t cgroup2 none /sys/fs/cgroup || echo "WATTIO-ERROR mount cgroup2"
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mke2fs -q /dev/vda && mount -t ext2 /dev/vda /mnt || echo "WATTIO-ERROR disk"
echo "+io +memory +cpu" >/sys/fs/cgroup/cgroup.subtree_control || echo "WATTIO-ERROR controllers"
mkdir /sys/fs/cgroup/writer /sys/fs/cgroup/neighbour
echo WATTIO-READY
for mode in bpf bytes; do
    WATTIO_KERNEL_IO=\$mode wattio record --source model --freq 2 --by cgroup --by-interval 1s --duration $((seconds + 6))s -o /tmp/\$mode.csv 2>/tmp/\$mode.err &
    rec=\$!
    sleep 2
    sh -c 'echo \$\$ >/sys/fs/cgroup/neighbour/cgroup.procs; exec timeout $((seconds + 2)) sh -c "while :; do :; done"' &
    sh -c 'echo \$\$ >/sys/fs/cgroup/writer/cgroup.procs; dd if=/dev/zero of=/mnt/f bs=1M count=$mib 2>/dev/null; sync'
    wait \$rec
    echo WATTIO-RC \$mode \$?
    echo WATTIO-\$(echo \$mode | tr a-z A-Z)-BEGIN
    cat /tmp/\$mode.csv
    echo WATTIO-\$(echo \$mode | tr a-z A-Z)-END
    cat /tmp/\$mode.err
    rm -f /mnt/f
    sync
    sleep 1
done
poweroff -f
EOF
else
    cat >>"$root/init" <<EOF
mount -t 9p -o trans=virtio,version=9p2000.L,ro wattio /run/wattio-host || echo "WATTIO-ERROR mount 9p"
scaph=""
mount -t 9p -o trans=virtio,version=9p2000.L,ro scaph /run/scaph 2>/dev/null && scaph=/run/scaph/intel-rapl:0/energy_uj
counters() {
    [ -n "\$scaph" ] && echo "WATTIO-COUNTERS \$(cat /run/wattio-host/intel-rapl:0/energy_uj) \$(cat \$scaph)"
}
echo WATTIO-READY
i=0
while [ ! -f /run/wattio-host/wattio-host.json ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i+1)); done
# Scaphandre writes a VM's file after three of its 5 s steps.
i=0
while [ -n "\$scaph" ] && [ ! -s \$scaph ] && [ \$i -lt 900 ]; do sleep 0.1; i=\$((i+1)); done
counters
echo WATTIO-START
wattio measure --source host --json -- $workload >/tmp/out.json 2>/tmp/err.txt
echo WATTIO-END
counters
echo WATTIO-JSON-BEGIN
cat /tmp/out.json
echo WATTIO-JSON-END
cat /tmp/err.txt
$after
poweroff -f
EOF
fi
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$out")
echo "vm-guest-initramfs: wrote $out ($(du -h "$out" | cut -f1))"
