// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * The kernel's I/O work, charged to the process whose I/O caused it: the CPU time of kworker
 * writeback, of block I/O completions and of network receive/transmit in interrupt and softirq
 * context. Read by `wattio top`, `record --by`, `export --by` and `measure`
 * (attribution/kernel_io.rs).
 *
 * Who owns what (all recorded in the owner's process context, where `current` is the owner):
 *   - an inode's dirty pages: the last process that dirtied one (writeback_dirty_folio);
 *   - a socket: the last process that sent or received on it (sock_send_length,
 *     sock_recv_length);
 *   - a bio: the process submitting it, or, inside a kworker's writeback of an inode, the
 *     inode's owner (block_bio_queue).
 * What is timed:
 *   - writeback: a kernel thread's __writeback_single_inode, between its two tracepoints
 *     (fs/fs-writeback.c), less the time it was switched out (sched_switch) and the interrupt
 *     time on its CPU meanwhile, charged to the inode's owner;
 *   - interrupt work: each hard interrupt, each NET_TX/NET_RX/BLOCK softirq and each
 *     cross-CPU call (the three ways blk-mq completes a request, block/blk-mq.c), less the
 *     frames nested in it, split between the owners of the requests it completed
 *     (block_rq_complete) and of the packets it delivered to or sent from a socket
 *     (tcp_probe, sk_data_ready for UDP, net_dev_start_xmit), by weight: one
 *     per request or packet plus one per 4 KiB. A frame with no owned event is unowned work.
 * The task that was running (the doer: the kworker, ksoftirqd, the interrupted process, 0 for
 * the idle task) is recorded with the time taken from it, since its own CPU time counts that
 * work unless the kernel accounts interrupt time apart (CONFIG_IRQ_TIME_ACCOUNTING): user
 * space decides.
 * Only tracepoints are used (no fentry/kprobe: some kernels and sandboxes refuse function
 * tracing), and only the kernel fields read are declared (CO-RE), so no kernel headers are
 * needed.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PRESERVE __attribute__((preserve_access_index))
#define PF_KTHREAD 0x00200000

struct task_struct {
	int pid;
	int tgid;
	unsigned int flags;
	__u64 start_boottime;
	struct task_struct *group_leader;
	char comm[16];
} PRESERVE;

struct address_space {
	struct inode *host;
} PRESERVE;

struct bio;

struct request {
	struct bio *bio;
} PRESERVE;

#define IPPROTO_UDP 17

struct sock {
	__u16 sk_protocol;
} PRESERVE;

struct sk_buff {
	unsigned int len;
	struct sock *sk;
} PRESERVE;

/* Kinds of work; user space mirrors them (attribution/kernel_io.rs, `Kind`). */
#define K_WRITEBACK 0
#define K_BLOCK 1
#define K_NET_RX 2
#define K_NET_TX 3
#define K_HARDIRQ 4 /* unowned only: a hard interrupt with no owned event */
#define KINDS 5

#define NET_TX_SOFTIRQ 2
#define NET_RX_SOFTIRQ 3
#define BLOCK_SOFTIRQ 4

struct owner {
	__u32 tgid;
	__u32 pad;
	__u64 cgroup_id;
};

/* One process's kernel I/O work, in ns by kind; user space mirrors this (`OwnerRecord`). */
struct owner_work {
	__u64 ns[KINDS];
	__u64 cgroup_id;
	__u64 start_ns; /* start_boottime: with the tgid, the process's identity */
	char comm[16];
};

/* Time taken from a task that did others' I/O work (the doer); mirrored as `DoerRecord`. */
struct doer_work {
	__u64 task_ns; /* in a kernel thread's writeback: always in its own CPU time */
	__u64 irq_ns;  /* in an interrupt frame on top of it */
	__u64 cgroup_id;
	__u64 start_ns;
	char comm[16];
};

#define SLOTS 8
/* Interrupt frames nest one way only: a hard interrupt or a cross-CPU call (HARD) may
 * interrupt a softirq (SOFT), never the other way round, and neither nests in itself. One
 * frame per level with an active flag, rather than a stack: a tracing program skipped because
 * it was already running on this CPU (the kernel's recursion guard) then costs one frame, not
 * every frame after it. */
#define SOFT 0
#define HARD 1

struct slot {
	__u32 tgid;
	__u32 kind;
	__u64 weight;
};

struct frame {
	__u64 start;
	__u64 inner; /* ns of a HARD frame inside this SOFT one */
	__u32 kind;  /* the unowned kind of this frame; KINDS: not counted when unowned */
	__u32 n;
	__u32 active;
	__u32 pad;
	__u64 overflow; /* weight of owned events past SLOTS */
	struct slot slots[SLOTS];
};

struct cpu_state {
	__u64 irq_total; /* ns of outermost frames on this CPU, for writeback spans */
	struct frame frames[2];
};

struct span {
	__u64 start;
	__u64 off_since;
	__u64 off_ns;
	__u64 irq_mark;
	__u64 irq_ns;
	struct owner owner;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct owner_work);
} owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct doer_work);
} doers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KINDS);
	__type(key, __u32);
	__type(value, __u64);
} unowned SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct owner);
} inode_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct owner);
} sock_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct owner);
} bio_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct span);
} spans SEC(".maps");

/* How many spans are open: sched_switch looks no further while it is 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} open_spans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpus SEC(".maps");

/* `wattio measure`: the processes of the measured command (a process whose parent is watched
 * is watched from its fork on) and the kernel I/O work done for them, by kind. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KINDS);
	__type(key, __u32);
	__type(value, __u64);
} watched_ns SEC(".maps");

/* Interrupt-frame time that watched processes gave to others' I/O work (index 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} watched_gave_ns SEC(".maps");

static __always_inline void add(void *map, __u32 kind, __u64 ns)
{
	__u64 *v = bpf_map_lookup_elem(map, &kind);

	if (v)
		__sync_fetch_and_add(v, ns);
}

/* The current process as an owner; also makes sure it has an owner record to be charged to. */
/* The process of the running thread, as /proc names it: its thread-group leader's start time
 * (field 22 of /proc/PID/stat; with the tgid, which process it is) and comm. */
static __always_inline void identify(__u64 *start_ns, char comm[16])
{
	struct task_struct *leader = bpf_get_current_task_btf()->group_leader;

	*start_ns = leader->start_boottime;
	bpf_probe_read_kernel_str(comm, 16, leader->comm);
}

/* The current process as an owner; also makes sure it has an owner record to be charged to,
 * made afresh when its tgid's record is another (ended) process's. */
static __always_inline int current_owner(struct owner *o)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct owner_work *cur;
	__u64 start;

	if (tgid == 0 || (t->flags & PF_KTHREAD))
		return 0;
	o->tgid = tgid;
	o->pad = 0;
	o->cgroup_id = bpf_get_current_cgroup_id();
	start = t->group_leader->start_boottime;
	cur = bpf_map_lookup_elem(&owners, &tgid);
	if (!cur || cur->start_ns != start) {
		struct owner_work w = {};

		w.cgroup_id = o->cgroup_id;
		identify(&w.start_ns, w.comm);
		bpf_map_update_elem(&owners, &tgid, &w, BPF_ANY);
	}
	return 1;
}

/* Records that `key` (an inode, socket or bio) belongs to `o`, writing only on a change. */
static __always_inline void own(void *map, __u64 key, struct owner *o)
{
	struct owner *cur = bpf_map_lookup_elem(map, &key);

	if (cur && cur->tgid == o->tgid && cur->cgroup_id == o->cgroup_id)
		return;
	bpf_map_update_elem(map, &key, o, BPF_ANY);
}

/* Charges `ns` of work of `kind` to process `tgid`; false where it has no record (pushed out
 * of the map): the time is then unowned and stays with the task that ran it. */
static __always_inline int charge_owner(__u32 tgid, __u32 kind, __u64 ns)
{
	struct owner_work *w;

	if (kind >= KINDS)
		return 0;
	w = bpf_map_lookup_elem(&owners, &tgid);
	if (!w) {
		add(&unowned, kind, ns);
		return 0;
	}
	__sync_fetch_and_add(&w->ns[kind], ns);
	if (bpf_map_lookup_elem(&watched, &tgid))
		add(&watched_ns, kind, ns);
	return 1;
}

/* The running task gave `ns` to others' I/O work. */
static __always_inline void charge_doer(__u64 ns, int irq)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct doer_work *d = bpf_map_lookup_elem(&doers, &tgid);
	__u64 start = tgid ? bpf_get_current_task_btf()->group_leader->start_boottime : 0;

	if (!d || d->start_ns != start) {
		struct doer_work w = {};

		w.cgroup_id = bpf_get_current_cgroup_id();
		if (tgid)
			identify(&w.start_ns, w.comm);
		else
			bpf_get_current_comm(w.comm, sizeof(w.comm));
		bpf_map_update_elem(&doers, &tgid, &w, BPF_ANY);
		d = bpf_map_lookup_elem(&doers, &tgid);
		if (!d)
			return;
	}
	if (irq) {
		__sync_fetch_and_add(&d->irq_ns, ns);
		if (bpf_map_lookup_elem(&watched, &tgid))
			add(&watched_gave_ns, 0, ns);
	} else
		__sync_fetch_and_add(&d->task_ns, ns);
}

static __always_inline struct cpu_state *cpu(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpus, &zero);
}

static __always_inline void push(__u32 level, __u32 kind)
{
	struct cpu_state *c = cpu();
	struct frame *f;

	if (!c || level > HARD)
		return;
	f = &c->frames[level];
	f->start = bpf_ktime_get_ns();
	f->inner = 0;
	f->kind = kind;
	f->n = 0;
	f->overflow = 0;
	f->active = 1;
}

static __always_inline void pop(__u32 level)
{
	struct cpu_state *c = cpu();
	struct frame *f;
	__u64 now, dur, own_ns, total = 0, charged = 0;
	__u32 n, i;

	if (!c || level > HARD)
		return;
	f = &c->frames[level];
	if (!f->active)
		return;
	/* The time first: an interrupt after it and before the flag lands in no frame twice. */
	now = bpf_ktime_get_ns();
	f->active = 0;
	dur = now > f->start ? now - f->start : 0;
	own_ns = dur > f->inner ? dur - f->inner : 0;
	if (level == HARD && c->frames[SOFT].active)
		c->frames[SOFT].inner += dur;
	else
		c->irq_total += dur;
	n = f->n;
	for (i = 0; i < SLOTS; i++) {
		if (i >= n)
			break;
		total += f->slots[i].weight;
	}
	if (total == 0) {
		add(&unowned, f->kind, own_ns);
		return;
	}
	total += f->overflow;
	for (i = 0; i < SLOTS; i++) {
		__u64 part;

		if (i >= n)
			break;
		part = own_ns * f->slots[i].weight / total;
		if (charge_owner(f->slots[i].tgid, f->slots[i].kind, part))
			charged += part;
	}
	if (f->overflow)
		add(&unowned, f->kind, own_ns * f->overflow / total);
	if (charged)
		charge_doer(charged, 1);
}

/* An owned event inside the current interrupt frame (none outside one: in process context the
 * work is already the running process's). */
static __always_inline void event(struct owner *o, __u32 kind, __u64 bytes)
{
	struct cpu_state *c = cpu();
	struct frame *f;
	__u64 w = 1 + bytes / 4096;
	__u32 i, n;

	if (!c)
		return;
	if (c->frames[HARD].active)
		f = &c->frames[HARD];
	else if (c->frames[SOFT].active)
		f = &c->frames[SOFT];
	else
		return;
	n = f->n;
	for (i = 0; i < SLOTS; i++) {
		if (i >= n)
			break;
		if (f->slots[i].tgid == o->tgid && f->slots[i].kind == kind) {
			f->slots[i].weight += w;
			return;
		}
	}
	if (n < SLOTS) {
		f->slots[n].tgid = o->tgid;
		f->slots[n].kind = kind;
		f->slots[n].weight = w;
		f->n = n + 1;
	} else {
		f->overflow += w;
	}
}

static __always_inline void sock_event(__u64 sk, __u32 kind, __u64 bytes)
{
	struct owner *o = bpf_map_lookup_elem(&sock_owner, &sk);

	if (o)
		event(o, kind, bytes);
}

/* ---- interrupt frames ---- */

SEC("tp_btf/irq_handler_entry")
int irq_entry(__u64 *ctx)
{
	push(HARD, K_HARDIRQ);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int irq_exit(__u64 *ctx)
{
	pop(HARD);
	return 0;
}

static __always_inline int io_softirq(__u64 vec)
{
	return vec == NET_TX_SOFTIRQ || vec == NET_RX_SOFTIRQ || vec == BLOCK_SOFTIRQ;
}

static __always_inline __u32 softirq_kind(__u64 vec)
{
	if (vec == NET_RX_SOFTIRQ)
		return K_NET_RX;
	if (vec == NET_TX_SOFTIRQ)
		return K_NET_TX;
	return K_BLOCK;
}

SEC("tp_btf/softirq_entry")
int softirq_entry(__u64 *ctx)
{
	if (io_softirq(ctx[0]))
		push(SOFT, softirq_kind(ctx[0]));
	return 0;
}

SEC("tp_btf/softirq_exit")
int softirq_exit(__u64 *ctx)
{
	if (io_softirq(ctx[0]))
		pop(SOFT);
	return 0;
}

/* A cross-CPU call that completes no request is not I/O work: KINDS drops it when unowned. */
SEC("tp_btf/csd_function_entry")
int csd_entry(__u64 *ctx)
{
	push(HARD, KINDS);
	return 0;
}

SEC("tp_btf/csd_function_exit")
int csd_exit(__u64 *ctx)
{
	pop(HARD);
	return 0;
}

/* ---- owners ---- */

SEC("tp_btf/writeback_dirty_folio")
int dirty_folio(__u64 *ctx)
{
	struct address_space *mapping = (struct address_space *)ctx[1];
	struct owner o;

	if (!mapping || !current_owner(&o))
		return 0;
	own(&inode_owner, (__u64)mapping->host, &o);
	return 0;
}

static __always_inline int sock_owned(__u64 sk)
{
	struct owner o;

	if (sk && current_owner(&o))
		own(&sock_owner, sk, &o);
	return 0;
}

SEC("tp_btf/sock_send_length")
int sock_send(__u64 *ctx)
{
	return sock_owned(ctx[0]);
}

SEC("tp_btf/sock_recv_length")
int sock_recv(__u64 *ctx)
{
	return sock_owned(ctx[0]);
}

SEC("tp_btf/block_bio_queue")
int bio_queue(__u64 *ctx)
{
	__u64 bio = ctx[0];
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct span *s = bpf_map_lookup_elem(&spans, &tid);
	struct owner o;

	if (s)
		own(&bio_owner, bio, &s->owner);
	else if (current_owner(&o))
		own(&bio_owner, bio, &o);
	return 0;
}

/* ---- owned events ---- */

SEC("tp_btf/block_rq_complete")
int rq_complete(__u64 *ctx)
{
	struct request *rq = (struct request *)ctx[0];
	__u64 bio = (__u64)rq->bio;
	struct owner *o;

	if (!bio)
		return 0;
	o = bpf_map_lookup_elem(&bio_owner, &bio);
	if (o) {
		event(o, K_BLOCK, ctx[2] & 0xffffffff);
		bpf_map_delete_elem(&bio_owner, &bio);
	}
	return 0;
}

/* Each TCP segment a socket receives (tcp_rcv_established's tracepoint). */
SEC("tp_btf/tcp_probe")
int tcp_rcv(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[1];

	sock_event(ctx[0], K_NET_RX, skb->len);
	return 0;
}

/* Data ready on a UDP socket (TCP's segments are counted above). */
SEC("tp_btf/sk_data_ready")
int udp_rcv(__u64 *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];

	if (sk->sk_protocol == IPPROTO_UDP)
		sock_event((__u64)sk, K_NET_RX, 0);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int xmit(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];

	sock_event((__u64)skb->sk, K_NET_TX, skb->len);
	return 0;
}

/* ---- writeback spans ---- */

SEC("tp_btf/writeback_single_inode_start")
int wb_start(__u64 *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 inode = ctx[0];
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
	struct owner *o;
	struct cpu_state *c = cpu();
	struct span s = {};
	__s64 *open;

	if (!(t->flags & PF_KTHREAD) || !c)
		return 0; /* fsync and sync in a process: already that process's time */
	o = bpf_map_lookup_elem(&inode_owner, &inode);
	if (!o)
		return 0; /* dirtied before wattio started, or by the kernel: timed as unowned below */
	s.start = bpf_ktime_get_ns();
	s.irq_mark = c->irq_total;
	s.owner = *o;
	/* A span left open (its end skipped) is replaced without counting it again. */
	if (bpf_map_lookup_elem(&spans, &tid)) {
		bpf_map_update_elem(&spans, &tid, &s, BPF_ANY);
		return 0;
	}
	if (bpf_map_update_elem(&spans, &tid, &s, BPF_NOEXIST) == 0) {
		open = bpf_map_lookup_elem(&open_spans, &zero);
		if (open)
			__sync_fetch_and_add(open, 1);
	}
	return 0;
}

SEC("tp_btf/writeback_single_inode")
int wb_end(__u64 *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
	struct span *s = bpf_map_lookup_elem(&spans, &tid);
	struct cpu_state *c = cpu();
	__u64 now = bpf_ktime_get_ns(), ns, away;
	__s64 *open;

	if (!s)
		return 0;
	if (c)
		s->irq_ns += c->irq_total - s->irq_mark;
	ns = now > s->start ? now - s->start : 0;
	away = s->off_ns + s->irq_ns;
	ns = ns > away ? ns - away : 0;
	if (charge_owner(s->owner.tgid, K_WRITEBACK, ns))
		charge_doer(ns, 0);
	bpf_map_delete_elem(&spans, &tid);
	open = bpf_map_lookup_elem(&open_spans, &zero);
	if (open)
		__sync_fetch_and_add(open, -1);
	return 0;
}

SEC("tp_btf/sched_switch")
int switch_(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 zero = 0, tid;
	__s64 *open = bpf_map_lookup_elem(&open_spans, &zero);
	struct cpu_state *c;
	struct span *s;
	__u64 now;

	if (!open || *open <= 0)
		return 0;
	c = cpu();
	now = bpf_ktime_get_ns();
	tid = prev->pid;
	s = bpf_map_lookup_elem(&spans, &tid);
	if (s) {
		s->off_since = now;
		if (c)
			s->irq_ns += c->irq_total - s->irq_mark;
	}
	tid = next->pid;
	s = bpf_map_lookup_elem(&spans, &tid);
	if (s) {
		if (s->off_since)
			s->off_ns += now - s->off_since;
		s->off_since = 0;
		if (c)
			s->irq_mark = c->irq_total;
	}
	return 0;
}

/* ---- measure's watched processes ---- */

SEC("tp_btf/sched_process_fork")
int fork_(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&watched, &ptgid))
		bpf_map_update_elem(&watched, &ctgid, &one, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
