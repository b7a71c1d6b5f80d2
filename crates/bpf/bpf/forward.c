/* forward.c: the one-way switch's tc forwarder (clsact ingress, direct-action) for IPv4/TCP.
 * Client packets of handed-off connections (handoff mode) and of connections the program itself
 * directed at SYN time (l4 mode) get their MACs rewritten and are redirected to their node.
 * Map layouts are mirrored by crates/bpf/src/maps.rs; a Rust test and the _Static_asserts below
 * keep both sides equal. Hand-written C, compiled by crates/bpf/build.rs. */

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Entry actions. */
#define ACTION_HOLD 1    /* drop the client's packets (the client retransmits) */
#define ACTION_FORWARD 2 /* rewrite MACs and redirect to the node */

/* Entry flags. */
#define FLAG_L4 1 /* created by the l4 path: a SYN on it is a retransmission, not port reuse */
/* The egress interface is a veth (or netkit) whose peer is in another network namespace: hand
 * frames straight to the peer's ingress (bpf_redirect_peer) rather than transmitting them, which
 * saves the interface's transmit path and a pass through the CPU's backlog queue. */
#define FLAG_PEER 2

#define NODE_NONE 0xffff

/* Capacities (conns can be resized at load time; the others are fixed). */
#define MAX_CONNS 262144
#define MAX_NODES 256
#define MAX_SERVICES 64
#define MAX_SELECTION 65536

/* Selection modes (config.selection_mode). */
#define SELECT_ROUND_ROBIN 0 /* per-CPU rotating index into the table (rr, wrr, lc tables) */
#define SELECT_HASH 1        /* hash of the 4-tuple into the table */

/* Counter slots of the per-CPU `stats` array. */
#define STAT_HANDLED 0    /* unfragmented IPv4/TCP packets looked up */
#define STAT_FORWARDED 1  /* redirected to a node */
#define STAT_HELD 2       /* dropped because their entry is on hold */
#define STAT_DROPPED 3    /* dropped for another reason (l4: no node, full map) */
#define STAT_SYN_RESETS 4 /* pure SYN on a handoff entry: entry deleted, SYN passed */
#define STAT_L4_NEW 5     /* entries created by the l4 path */
#define STAT_SLOTS 8

#define IP_FRAGMENT_BITS 0x3fff /* MF flag and fragment offset, host order */
/* Ethernet + the longest IPv4 header + a TCP header without options. */
#define HEADERS_MAX (sizeof(struct ethhdr) + 60 + sizeof(struct tcphdr))

struct conn_key {
	__be32 saddr; /* client */
	__be32 daddr; /* service (VIP) */
	__be16 sport;
	__be16 dport;
};

struct conn_entry {
	__u8 node_mac[ETH_ALEN];
	__u8 switch_mac[ETH_ALEN];
	__u32 ifindex;       /* interface to redirect out of */
	__u8 action;         /* ACTION_HOLD or ACTION_FORWARD */
	__u8 flags;          /* FLAG_* */
	__u16 node;          /* node slot (l4 entries) or NODE_NONE */
	__u32 reserved;
	__u64 last_seen_ns;  /* bpf_ktime_get_ns() of the last matching packet (racy) */
	__u64 packets;       /* forwarded packets (racy) */
	__u64 bytes;         /* forwarded bytes (racy) */
};

struct node_slot {
	__u8 mac[ETH_ALEN];
	__u8 switch_mac[ETH_ALEN];
	__u32 ifindex; /* 0: empty slot */
	__u32 flags;   /* FLAG_PEER or 0, copied into the entries made for this node */
};

struct service_key {
	__be32 vip;
	__be16 port;
	__u16 reserved;
};

struct fwd_config {
	__u32 selection_len;
	__u32 selection_mode;
};

_Static_assert(sizeof(struct conn_key) == 12, "conn_key layout");
_Static_assert(sizeof(struct conn_entry) == 48, "conn_entry layout");
_Static_assert(__builtin_offsetof(struct conn_entry, ifindex) == 12, "conn_entry.ifindex");
_Static_assert(__builtin_offsetof(struct conn_entry, action) == 16, "conn_entry.action");
_Static_assert(__builtin_offsetof(struct conn_entry, node) == 18, "conn_entry.node");
_Static_assert(__builtin_offsetof(struct conn_entry, last_seen_ns) == 24, "conn_entry.last_seen_ns");
_Static_assert(__builtin_offsetof(struct conn_entry, bytes) == 40, "conn_entry.bytes");
_Static_assert(sizeof(struct node_slot) == 20, "node_slot layout");
_Static_assert(__builtin_offsetof(struct node_slot, flags) == 16, "node_slot.flags");
_Static_assert(sizeof(struct service_key) == 8, "service_key layout");
_Static_assert(sizeof(struct fwd_config) == 8, "fwd_config layout");

/* A plain (preallocated) hash, not an LRU: entries are state user space set on purpose (a HOLD
 * entry must not vanish mid-handoff), so a full map refuses new l4 entries instead of silently
 * evicting live connections; user space expires idle entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CONNS);
	__type(key, struct conn_key);
	__type(value, struct conn_entry);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES);
	__type(key, __u32);
	__type(value, struct node_slot);
} nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__type(key, struct service_key);
	__type(value, __u32);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SELECTION);
	__type(key, __u32);
	__type(value, __u32);
} selection SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fwd_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rr_cursor SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &slot);
	if (c)
		*c += 1;
}

/* murmur3's finaliser; mirrored by ConnKey::flow_hash in Rust. */
static __always_inline __u32 mix(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* Over the raw (network order) words as they sit in memory. */
static __always_inline __u32 flow_hash(const struct conn_key *k)
{
	__u32 h = mix(k->saddr ^ 0x9e3779b9);
	h = mix(h ^ k->daddr);
	return mix(h ^ (((__u32)k->sport << 16) | k->dport));
}

static __always_inline int forward_to(struct __sk_buff *skb, struct ethhdr *eth,
				      struct conn_entry *e, __u64 now)
{
	e->last_seen_ns = now;
	e->packets += 1;
	e->bytes += skb->len;
	/* Source MAC too: otherwise the bridge learns the client's MAC on the switch's port. */
	__builtin_memcpy(eth->h_dest, e->node_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, e->switch_mac, ETH_ALEN);
	count(STAT_FORWARDED);
	if (e->flags & FLAG_PEER)
		return bpf_redirect_peer(e->ifindex, 0);
	return bpf_redirect(e->ifindex, 0);
}

/* l4 mode: a pure SYN to a configured service with no entry. Picks a node slot from the
 * selection table, creates a FORWARD entry and redirects the SYN. */
static __always_inline int direct_new(struct __sk_buff *skb, struct ethhdr *eth,
				      struct conn_key *key, __u64 now)
{
	struct service_key svc = {.vip = key->daddr, .port = key->dport, .reserved = 0};
	if (!bpf_map_lookup_elem(&services, &svc))
		return TC_ACT_OK;

	__u32 zero = 0;
	struct fwd_config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return TC_ACT_OK;
	__u32 len = cfg->selection_len;
	if (len == 0 || len > MAX_SELECTION) {
		count(STAT_DROPPED);
		return TC_ACT_SHOT;
	}
	__u32 pos;
	if (cfg->selection_mode == SELECT_HASH) {
		pos = flow_hash(key) % len;
	} else {
		__u32 *cursor = bpf_map_lookup_elem(&rr_cursor, &zero);
		if (!cursor)
			return TC_ACT_OK;
		pos = *cursor % len;
		*cursor = pos + 1;
	}
	__u32 *slot = bpf_map_lookup_elem(&selection, &pos);
	if (!slot) {
		count(STAT_DROPPED);
		return TC_ACT_SHOT;
	}
	__u32 node_index = *slot;
	struct node_slot *node = bpf_map_lookup_elem(&nodes, &node_index);
	if (!node || node->ifindex == 0) {
		count(STAT_DROPPED);
		return TC_ACT_SHOT;
	}

	struct conn_entry fresh;
	__builtin_memset(&fresh, 0, sizeof(fresh));
	__builtin_memcpy(fresh.node_mac, node->mac, ETH_ALEN);
	__builtin_memcpy(fresh.switch_mac, node->switch_mac, ETH_ALEN);
	fresh.ifindex = node->ifindex;
	fresh.action = ACTION_FORWARD;
	fresh.flags = FLAG_L4 | (node->flags & FLAG_PEER);
	fresh.node = (__u16)node_index;
	fresh.last_seen_ns = now;
	/* NOEXIST: if another CPU created the entry for a duplicate SYN first, use that one. */
	if (bpf_map_update_elem(&conns, key, &fresh, BPF_NOEXIST) == 0)
		count(STAT_L4_NEW);
	struct conn_entry *e = bpf_map_lookup_elem(&conns, key);
	if (!e) {
		/* The map is full: drop the SYN; the client retries after expire made room. */
		count(STAT_DROPPED);
		return TC_ACT_SHOT;
	}
	return forward_to(skb, eth, e, now);
}

SEC("classifier")
int locus_forward(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	/* Headers outside the linear part (rare on veth/bridges): pull them in once. */
	if (data + HEADERS_MAX > data_end) {
		__u32 want = skb->len < HEADERS_MAX ? skb->len : HEADERS_MAX;
		if (data + want > data_end) {
			if (bpf_skb_pull_data(skb, want))
				return TC_ACT_OK;
			data = (void *)(long)skb->data;
			data_end = (void *)(long)skb->data_end;
		}
	}

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return TC_ACT_OK;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK; /* IPv6, ARP, VLAN tags, ...: not ours */

	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return TC_ACT_OK;
	if (ip->version != 4 || ip->protocol != IPPROTO_TCP)
		return TC_ACT_OK;
	/* Fragments (rare: TCP sets DF) go to the stack; only a first fragment has ports. */
	if (ip->frag_off & bpf_htons(IP_FRAGMENT_BITS))
		return TC_ACT_OK;
	__u32 ihl = ip->ihl;
	if (ihl < 5)
		return TC_ACT_OK;
	/* ihl is 4 bits, so the offset is bounded by 60: the verifier tracks that range. */
	struct tcphdr *tcp = (void *)ip + ihl * 4;
	if ((void *)(tcp + 1) > data_end)
		return TC_ACT_OK;

	struct conn_key key = {
		.saddr = ip->saddr,
		.daddr = ip->daddr,
		.sport = tcp->source,
		.dport = tcp->dest,
	};
	int pure_syn = tcp->syn && !tcp->ack;
	__u64 now = bpf_ktime_get_ns();
	count(STAT_HANDLED);

	struct conn_entry *e = bpf_map_lookup_elem(&conns, &key);
	if (e) {
		if (pure_syn && !(e->flags & FLAG_L4)) {
			/* The client reused its port after a handed-off connection: the old entry is
			 * stale. Let the SYN reach the switch (or, for an l4 service, pick anew). */
			bpf_map_delete_elem(&conns, &key);
			count(STAT_SYN_RESETS);
			return direct_new(skb, eth, &key, now);
		}
		if (e->action == ACTION_FORWARD)
			return forward_to(skb, eth, e, now);
		if (e->action == ACTION_HOLD) {
			e->last_seen_ns = now;
			count(STAT_HELD);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
	}
	if (!pure_syn)
		/* No entry and not a SYN: the switch's own connection, or a connection whose entry is
		 * gone. The stack decides; with no socket it answers RST, so a client whose l4 entry
		 * expired learns it at once instead of retransmitting into a black hole. */
		return TC_ACT_OK;
	return direct_new(skb, eth, &key, now);
}

/* Only GPL-neutral helpers are used (map ops, ktime, redirect, redirect_peer, pull_data). */
char _license[] SEC("license") = "Apache-2.0";
