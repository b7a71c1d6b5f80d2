//! The node's descriptors: the budget of what each client connection can need (its socket,
//! and a file, an origin or peer connection, or with `handoff.upstream` the upstream
//! connection and two relay pipes) and what the node holds whatever the load; `connection_limit`
//! raises the soft open-file limit and caps `max_connections` to fit it (the default quietly
//! on a host set up for a server); `shed_answer` is the 503 a worker answers connections with
//! when descriptors run short.

use locus_io::{ConnectionPlan, DescriptorBudget, OpenFileLimit, TooFewDescriptors};

use crate::config::{NodeConfig, NodeLimits, RehandoffPolicy};

/// Idle origin connections each worker keeps (see `origin::MAX_IDLE`).
const ORIGIN_IDLE_KEPT: u64 = 64;

/// The descriptors a node with `workers` worker threads needs for `config`.
pub fn descriptor_budget(config: &NodeConfig, workers: usize) -> DescriptorBudget {
    let workers = workers as u64;
    let handoff = config.handoff.as_ref();
    let threads = workers + u64::from(config.admin.is_some()) + u64::from(handoff.is_some());
    let budget = DescriptorBudget::new()
        .fixed("standard streams", 3)
        .fixed("listeners", threads)
        .fixed("event loops", 2 * threads)
        .fixed("spare descriptors", workers)
        .fixed("other", 16)
        .per_connection("client socket", 1)
        .per_connection("file, origin or peer connection", 1);
    let budget = match config.origin {
        Some(_) => budget.per_connection_up_to("idle origin connections", 1, ORIGIN_IDLE_KEPT * workers),
        None => budget,
    };
    let Some(h) = handoff else { return budget };
    let budget = budget
        .fixed("control channels and prepared sockets", 16 + h.prepared_sockets as u64)
        .per_connection("restored socket", 1);
    let budget = match h.upstream {
        Some(_) => budget.per_connection("upstream connection and relay pipes", 5),
        None => budget,
    };
    match h.rehandoff {
        RehandoffPolicy::Forward => budget.per_connection("idle peer connections", 1),
        RehandoffPolicy::Handoff => budget,
    }
}

/// The connections a node with `workers` workers takes for `config` under `limit`.
pub fn plan(
    config: &NodeConfig,
    workers: usize,
    limit: OpenFileLimit,
) -> Result<ConnectionPlan, TooFewDescriptors> {
    let default = NodeLimits::default().max_connections as u64;
    let budget = descriptor_budget(config, workers);
    locus_io::plan_connections(config.limits.max_connections as u64, default, &budget, limit)
}

/// Raise the soft open-file limit to the hard one (as NGINX's `worker_rlimit_nofile` and
/// HAProxy do) and return the connection limit that fits it: `limits.max_connections`, or
/// fewer.
///
/// Lowered rather than refused (the switch does the same, see its `open_files::plan`): the
/// default of 10,000 connections needs some 20,030 descriptors, a little more than the common
/// limit of 20,000 and far more than 1,024, and a node that answers connections past a
/// lowered limit is better than one that will not start. The default fitted to a limit of at
/// least 10,000 descriptors is logged as information (a stock host with 20,000 starts without
/// a warning); a configured value that does not fit, or the default under a smaller limit
/// (1,024), is a warning. Connections
/// past the limit are closed at once, as before. A limit that cannot hold a single connection
/// is an error.
pub fn connection_limit(config: &NodeConfig, workers: usize) -> Result<usize, TooFewDescriptors> {
    let plan = plan(config, workers, locus_io::raise_open_file_limit_for_server())?;
    if let Some(warning) = plan.warning() {
        tracing::warn!("{warning}");
    }
    if let Some(notice) = plan.notice() {
        tracing::info!("{notice}");
    }
    Ok(plan.max_connections as usize)
}

/// The answer to a connection shed for want of descriptors: 503, closing.
pub fn shed_answer(node_headers: &[u8]) -> Vec<u8> {
    let mut answer = b"HTTP/1.1 503 Service Unavailable\r\n".to_vec();
    answer.extend_from_slice(node_headers);
    answer.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HandoffConfig;

    fn per_connection(c: &NodeConfig) -> u64 {
        let b = descriptor_budget(c, 2);
        b.needed(1_000_001) - b.needed(1_000_000)
    }

    #[test]
    fn a_connection_needs_its_socket_and_one_more_and_an_upstream_relay_needs_its_pipes() {
        let mut c = NodeConfig::default();
        assert_eq!(per_connection(&c), 2);
        c.handoff = Some(HandoffConfig::default());
        assert_eq!(per_connection(&c), 3, "a restored socket besides");
        c.handoff.as_mut().unwrap().upstream = Some("127.0.0.1:1".parse().unwrap());
        assert_eq!(per_connection(&c), 8);
    }

    #[test]
    fn the_default_node_fits_a_stock_20000_descriptor_limit_without_a_warning() {
        let stock = OpenFileLimit { soft: 20_000, hard: 20_000 };
        let mut c = NodeConfig { admin: Some("127.0.0.1:0".parse().unwrap()), ..NodeConfig::default() };
        for workers in [1, 2, 4, 16] {
            let p = plan(&c, workers, stock).unwrap();
            assert!(p.warning().is_none() && p.max_connections > 9_900, "{workers} workers: {p:?}");
            assert!(p.notice().unwrap().contains("the default 10000"), "{p:?}");
        }
        c.limits.max_connections = 12_000;
        let p = plan(&c, 2, stock).unwrap();
        assert!(p.warning().unwrap().contains("max_connections = 12000"), "a configured value is warned of");
        c.limits.max_connections = 10_000;
        let p = plan(&c, 2, OpenFileLimit { soft: 1024, hard: 1024 }).unwrap();
        assert!(p.warning().is_some() && p.max_connections < 512, "a limit below 10,000 is warned of");
    }

    #[test]
    fn the_shed_answer_is_a_closing_503_with_the_node_lines() {
        let a = String::from_utf8(shed_answer(b"Server: locus\r\n")).unwrap();
        assert!(a.starts_with("HTTP/1.1 503 Service Unavailable\r\nServer: locus\r\n"), "{a}");
        assert!(a.ends_with("Connection: close\r\n\r\n"), "{a}");
    }
}
