//! The switch's descriptors: the budget of what each client connection can need in the
//! configured mode and what the switch holds whatever the load, `plan` (raise the soft
//! open-file limit, cap `max_connections` to fit it), and the 503 a worker sheds new
//! connections with when descriptors run short (see `locus_io::Shedding`), so the open ones
//! keep theirs for their node connections.

use crate::config::{Mode, SwitchConfig, SwitchLimits};
use locus_io::{ConnectionPlan, DescriptorBudget, OpenFileLimit, TooFewDescriptors};

/// Over-limit connections being answered 503 at once; beyond this they are just closed.
pub const MAX_REJECTING: usize = 256;

/// Idle pipes each worker keeps for splicing.
pub const PIPES_KEPT: usize = 64;

/// The descriptors the switch needs for `config`: per client connection, its socket and a
/// node connection, and in splice mode the tunnel's two pipes (four descriptors); whatever
/// the load, the standard streams, listeners, event loops, idle pools, health checks,
/// connections being refused, and in handoff and l4 mode the control channels and the
/// forwarder. A response body spliced in proxy mode takes a pipe only when one can be made
/// without eating into the headroom, and goes through user space otherwise, so those pipes
/// are not counted per connection (only the idle ones kept).
pub fn descriptor_budget(config: &SwitchConfig) -> DescriptorBudget {
    let workers = config.worker_count() as u64;
    let nodes = config.nodes.len() as u64;
    let l = &config.limits;
    let pipe_fds_kept = 2 * PIPES_KEPT as u64 * workers;
    let budget = DescriptorBudget::new()
        .fixed("standard streams", 3)
        .fixed(
            "listeners",
            workers * (1 + u64::from(config.listen_tls.is_some())) + u64::from(config.admin.is_some()),
        )
        .fixed("event loops", 2 * (workers + 1))
        .fixed("spare descriptors", workers)
        .fixed("health checks", nodes)
        .fixed("access log", if config.access_log.is_some() { workers } else { 0 })
        .fixed("connections being refused", MAX_REJECTING as u64)
        .fixed("other", 16)
        .per_connection("client socket", 1)
        .per_connection("node connection", 1);
    let budget = match config.mode {
        Mode::Splice => {
            budget.per_connection("tunnel pipes", 4).per_connection_up_to("idle pipes", 4, pipe_fds_kept)
        }
        Mode::Proxy | Mode::Handoff | Mode::L4 => {
            let pipe = if l.splice_min_bytes > 0 { 2 } else { 0 };
            budget
                .per_connection_up_to("idle node connections", 1, l.pool_per_node as u64 * nodes * workers)
                .per_connection_up_to("idle pipes", pipe, pipe_fds_kept)
        }
    };
    match config.mode {
        // A connection a node refused is restored here as a new socket before the old closes.
        Mode::Handoff => budget
            .per_connection("restored socket", 1)
            .fixed("control channels", nodes * workers)
            .fixed("forwarder", 32),
        Mode::L4 => budget.fixed("control channels", nodes * workers).fixed("forwarder", 32),
        Mode::Proxy | Mode::Splice => budget,
    }
}

/// Raise the soft open-file limit to the hard one (as NGINX's `worker_rlimit_nofile` and
/// HAProxy do) and cap `limits.max_connections` to what it holds for `config`.
///
/// The switch lowers its connection limit rather than refusing to start (as HAProxy does
/// without `strict-limits`): the default of 10,000 connections needs up to some 21,000
/// descriptors, more than many hosts' hard limit, and a switch that will not start over a
/// limit it could have lived with serves no one. The default fitted to a limit of at least
/// 10,000 descriptors is said as information (a stock host with 20,000 starts without a
/// warning); a configured value that does not fit, or the default under a smaller limit
/// (1,024), is a warning. The lowered limit is enforced like a configured one — connections past it get a
/// 503 — so the switch never runs its own node connections into EMFILE by taking too many
/// clients. It refuses to start only when the limit cannot hold one connection.
/// `locus switch --check` reports the same.
pub fn plan(config: &SwitchConfig) -> Result<ConnectionPlan, TooFewDescriptors> {
    plan_within(config, locus_io::raise_open_file_limit_for_server())
}

/// `plan` under the open-file limit `limit`.
pub fn plan_within(config: &SwitchConfig, limit: OpenFileLimit) -> Result<ConnectionPlan, TooFewDescriptors> {
    let default = SwitchLimits::default().max_connections as u64;
    let configured = config.limits.max_connections as u64;
    locus_io::plan_connections(configured, default, &descriptor_budget(config), limit)
}

/// `plan`, with its warning (or notice) logged: the connection limit to enforce.
pub fn connection_limit(config: &SwitchConfig) -> Result<usize, TooFewDescriptors> {
    let plan = plan(config)?;
    if let Some(warning) = plan.warning() {
        tracing::warn!("{warning}");
    }
    if let Some(notice) = plan.notice() {
        tracing::info!("{notice}");
    }
    Ok(plan.max_connections as usize)
}

/// A worker's answer to a client connection shed for want of descriptors: the switch's 503,
/// made once, so without a Date (which a 5xx may leave out).
pub fn shed_answer() -> Vec<u8> {
    b"HTTP/1.1 503 Service Unavailable\r\nServer: locus\r\nContent-Type: text/plain\r\n\
      Content-Length: 20\r\nConnection: close\r\n\r\nService Unavailable\n"
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: &str, extra: &str) -> SwitchConfig {
        let text = format!(
            "mode = \"{mode}\"\nworkers = 2\n[[node]]\naddr = \"127.0.0.1:1\"\n[[node]]\naddr = \"127.0.0.1:2\"\n{extra}"
        );
        SwitchConfig::from_toml_str(&text, "test").unwrap()
    }

    fn per_connection(c: &SwitchConfig) -> u64 {
        // Past every pool's cap, each more connection costs exactly its own descriptors.
        let b = descriptor_budget(c);
        b.needed(1_000_001) - b.needed(1_000_000)
    }

    #[test]
    fn each_mode_counts_the_descriptors_its_connections_can_need() {
        assert_eq!(per_connection(&config("proxy", "")), 2, "client and node; pipes are optional");
        assert_eq!(per_connection(&config("splice", "")), 6, "client, node, two pipes");
        let key = "[handoff]\nkey = \"00112233445566778899aabbccddeeff\"\n";
        assert_eq!(per_connection(&config("handoff", key)), 3, "proxy's, and a restored socket");
    }

    #[test]
    fn the_shed_answer_is_a_complete_closing_503() {
        let answer = shed_answer();
        let mut head = locus_http::ResponseHead::default();
        assert!(locus_http::parse_response(&answer, 4096, false, &mut head).unwrap());
        assert_eq!((head.status, head.keep_alive), (503, false));
        assert_eq!(&answer[head.head_len..], b"Service Unavailable\n");
    }

    #[test]
    fn idle_pools_count_up_to_their_size() {
        let c = config("proxy", "[limits]\npool_per_node = 10\n");
        let b = descriptor_budget(&c);
        let fixed = b.needed(0);
        // 2 nodes × 2 workers × 10 idle node connections, 2 workers × 64 idle pipes of two.
        assert_eq!(b.needed(10_000) - fixed, 2 * 10_000 + 40 + 256);
        assert_eq!(b.needed(1) - fixed, 2 + 1 + 2, "a pool holds no more than was in use");
    }

    #[test]
    fn the_default_limits_are_lowered_under_a_1024_descriptor_limit_and_kept_under_a_large_one() {
        let c = config("proxy", "");
        let b = descriptor_budget(&c);
        let small = OpenFileLimit { soft: 1024, hard: 1024 };
        let plan = plan_within(&c, small).unwrap();
        assert!(plan.lowered_from == Some(10_000) && plan.max_connections > 50, "{plan:?}");
        assert!(b.needed(plan.max_connections) <= 1024);
        assert!(plan.warning().is_some(), "a default cut to a tenth is warned of");
        let large = OpenFileLimit { soft: 1 << 20, hard: 1 << 20 };
        let plan = plan_within(&c, large).unwrap();
        assert_eq!((plan.max_connections, plan.lowered_from), (10_000, None));
    }

    #[test]
    fn the_default_switch_fits_a_stock_20000_descriptor_limit_without_a_warning() {
        let stock = OpenFileLimit { soft: 20_000, hard: 20_000 };
        let nodes = "[[node]]\naddr = \"127.0.0.1:1\"\n".repeat(4);
        let mut c = SwitchConfig::from_toml_str(&nodes, "test").unwrap();
        c.admin = Some("127.0.0.1:0".parse().unwrap());
        for workers in [1, 2, 16] {
            c.workers = workers;
            let plan = plan_within(&c, stock).unwrap();
            assert!(plan.warning().is_none() && plan.notice().is_some(), "{workers} workers: {plan:?}");
        }
        c.workers = 2;
        c.limits.max_connections = 11_000;
        let plan = plan_within(&c, stock).unwrap();
        assert!(
            plan.warning().unwrap().contains("max_connections = 11000"),
            "a configured value is warned of"
        );
    }
}
