// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * The CPU times of every process in one read, for `wattio top`, `record --by` and `export --by`
 * (attribution by process): a BPF task iterator (kernel Documentation/bpf/bpf_iterators.rst)
 * that writes one fixed-size record per task into the iterator's seq_file. User space reads the
 * iterator once per refresh instead of opening and formatting one /proc/PID/stat per process.
 *
 * Each record carries what /proc/PID/stat (proc(5)) gives the /proc path, in nanoseconds, from
 * the same kernel fields that file is computed from (fs/proc/array.c, kernel/sched/cputime.c):
 *   - a thread's on-CPU time: se.sum_exec_runtime; the thread-group leader's record adds
 *     signal->sum_sched_runtime, the time of the group's ended threads. User space sums a
 *     group's records: thread_group_cputime's total, which cputime_adjust makes utime + stime.
 *   - the leader's cutime + cstime (reaped children), start_boottime (field 22), the parent's
 *     tgid (field 4) and comm.
 * Only the kernel fields read here are declared; libbpf relocates their offsets against the
 * running kernel's BTF (CO-RE), so no kernel headers are needed.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PRESERVE __attribute__((preserve_access_index))

struct sched_entity {
	__u64 sum_exec_runtime;
} PRESERVE;

struct signal_struct {
	__u64 cutime;
	__u64 cstime;
	unsigned long long sum_sched_runtime;
} PRESERVE;

struct task_struct {
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct sched_entity se;
	struct signal_struct *signal;
	__u64 start_boottime;
	char comm[16];
} PRESERVE;

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} PRESERVE;

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} PRESERVE;

/* One task; user space mirrors this layout (attribution/task_iter.rs, `TaskRecord`). */
struct task_times {
	__u32 tgid;
	__u32 pid;
	__u32 ppid;   /* leader only: the parent's tgid */
	__u32 leader; /* 1 for the thread-group leader */
	__u64 runtime_ns;
	__u64 children_ns; /* leader only */
	__u64 start_ns;    /* leader only */
	char comm[16];     /* leader only */
};

SEC("iter/task")
int dump_task(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_times r = {};

	if (!task)
		return 0; /* the end of the walk */
	r.tgid = task->tgid;
	r.pid = task->pid;
	r.runtime_ns = task->se.sum_exec_runtime;
	if (task->pid == task->tgid) {
		struct signal_struct *sig = task->signal;

		r.leader = 1;
		r.ppid = task->real_parent->tgid;
		r.runtime_ns += sig->sum_sched_runtime;
		r.children_ns = sig->cutime + sig->cstime;
		r.start_ns = task->start_boottime;
		bpf_probe_read_kernel_str(r.comm, sizeof(r.comm), task->comm);
	}
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
