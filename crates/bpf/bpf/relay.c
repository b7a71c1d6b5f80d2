/* relay.c: the sockmap relay's stream verdict. Every skb received on a joined socket is
 * redirected to the egress of its peer socket; a byte counter per socket lets user space know
 * when what was redirected has been written to the peer. Map layouts are mirrored by
 * crates/bpf/src/sockmap.rs. Hand-written C, compiled by crates/bpf/build.rs. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Sockets that may be joined at once (two per pair); user space sizes nothing else. */
#define MAX_SOCKETS 65536

/* Value of `peers`, keyed by the receiving socket's cookie. */
struct peer {
	__u64 peer_cookie; /* key of the peer socket in `targets` */
	__u64 bytes;       /* bytes received on this socket and redirected to the peer */
};

/* Sockets whose received bytes are relayed, by cookie (SO_COOKIE); the verdict is attached
 * to this map. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, __u64);
	__type(value, __u32);
} socks SEC(".maps");

/* Every joined socket, by cookie: the redirect targets (no program attached). A socket enters
 * it before it or its peer enters `socks`, so a redirect never finds its target missing. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, __u64);
	__type(value, __u32);
} targets SEC(".maps");

/* Receiving socket's cookie -> its peer. Written by user space before the socket enters `socks`,
 * deleted after it left. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SOCKETS);
	__type(key, __u64);
	__type(value, struct peer);
} peers SEC(".maps");

SEC("sk_skb/stream_verdict")
int relay_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct peer *p = bpf_map_lookup_elem(&peers, &cookie);

	/* Not (or no longer) joined: keep the bytes on this socket. */
	if (!p)
		return SK_PASS;
	/* The FIN comes through as an empty skb. Redirected, the peer's psock worker would "send"
	 * 0 bytes, take that for a broken pipe and set EPIPE on the peer socket; TCP has recorded
	 * the FIN already (the watcher passes it on), so the empty skb is dropped. */
	if (skb->len == 0)
		return SK_DROP;
	__sync_fetch_and_add(&p->bytes, skb->len);
	/* flags 0: the peer's egress (BPF_F_INGRESS would queue it for the peer's own reader). */
	return bpf_sk_redirect_hash(skb, &targets, &p->peer_cookie, 0);
}

char LICENSE[] SEC("license") = "GPL";
