// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * wattio's eBPF mechanism (Raffin & Trystram, "Dissecting the software-based measurement of CPU
 * energy consumption: a comparative analysis", 2024, section III-F).
 *
 * User space opens the RAPL events of the perf `power` PMU (one per domain and package, on the
 * CPU the PMU's cpumask names), stores their descriptors in `events`, and attaches `read_rapl` to
 * a software cpu-clock timer on each of those CPUs. On every tick the program reads the counters
 * opened on its own CPU (bpf_perf_event_read_value only reads CPU-bound events on their CPU) and
 * hands one timestamped record of raw counts to user space through the `readings` ring buffer.
 * Units and wrap correction stay in user space, shared with the perf mechanism.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* RAPL has at most five domains per package (pkg, cores, gpu, ram, psys). */
#define MAX_EVENTS_PER_CPU 8

/* The slice of `events` that belongs to one CPU: indices first .. first + count - 1. */
struct cpu_slots {
	__u32 first;
	__u32 count;
};

/* What one tick hands to user space; user space mirrors this layout (ebpf.rs, `Reading`). */
struct reading {
	__u64 mono_ns; /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 cpu;
	__u32 first;
	__u32 count;
	__s32 error; /* 0, or the first error of bpf_perf_event_read_value */
	__u64 counts[MAX_EVENTS_PER_CPU];
};

/* The RAPL perf events; max_entries is set by user space to the number of events. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 1);
} events SEC(".maps");

/* CPU number -> its slice of `events`; max_entries is set to the number of possible CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_slots);
	__uint(max_entries, 1);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} readings SEC(".maps");

/* Ticks whose record found the ring buffer full (user space behind): no energy is lost, since
 * counts are cumulative, but that tick's timestamp is. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} dropped SEC(".maps");

SEC("perf_event")
int read_rapl(void *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_slots *s = bpf_map_lookup_elem(&slots, &cpu);
	if (!s || s->count == 0)
		return 0;
	struct reading *r = bpf_ringbuf_reserve(&readings, sizeof(*r), 0);
	if (!r) {
		__u32 zero = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
		if (d)
			__sync_fetch_and_add(d, 1);
		return 0;
	}
	r->mono_ns = bpf_ktime_get_ns();
	r->cpu = cpu;
	r->first = s->first;
	r->count = s->count;
	r->error = 0;
	for (__u32 i = 0; i < MAX_EVENTS_PER_CPU; i++) {
		struct bpf_perf_event_value v = {};
		long err = 0;
		if (i < r->count)
			err = bpf_perf_event_read_value(&events, (r->first + i) & BPF_F_INDEX_MASK, &v,
							sizeof(v));
		if (err && !r->error)
			r->error = err;
		r->counts[i] = v.counter;
	}
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* bpf_perf_event_read_value is offered to GPL-compatible programs only. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";
