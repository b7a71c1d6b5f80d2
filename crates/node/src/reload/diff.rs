//! What a reloaded configuration changes against the running one: the settings that need new
//! sockets, threads or state built at start keep their running value (`keep_fixed_settings`
//! copies them back and names those that differed), and the settings that change live are
//! named when they differ (`live_changes`). Pure: two configurations in, names out.

use crate::config::NodeConfig;
use crate::dc::config::DcConfig;
use locus_io::keep_running;

/// Copy into `new` the settings a running node cannot change, from `running`; the names of
/// those that differed (they take a restart).
pub fn keep_fixed_settings(running: &NodeConfig, new: &mut NodeConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    // Sockets: bound at start.
    keep_running(&mut changed, "listen", &mut new.listen, &running.listen);
    keep_running(&mut changed, "admin", &mut new.admin, &running.admin);
    keep_running(&mut changed, "handoff", &mut new.handoff, &running.handoff);
    // Threads, and what is built once at start around them.
    keep_running(&mut changed, "workers", &mut new.workers, &running.workers);
    keep_running(&mut changed, "cpu_threads", &mut new.cpu_threads, &running.cpu_threads);
    keep_running(&mut changed, "storage", &mut new.storage, &running.storage);
    keep_running(&mut changed, "cpu", &mut new.cpu, &running.cpu);
    // Rendered into every response and cached document, the source of every miss.
    keep_running(&mut changed, "name", &mut new.name, &running.name);
    keep_running(&mut changed, "root", &mut new.root, &running.root);
    keep_running(&mut changed, "origin", &mut new.origin, &running.origin);
    // The cache's eviction order is the policy's own structure.
    keep_running(&mut changed, "cache.replacement", &mut new.cache.replacement, &running.cache.replacement);
    if (running.cache.capacity.bytes() == 0) != (new.cache.capacity.bytes() == 0) {
        changed.push("cache.capacity (turning the cache on or off)");
        new.cache.capacity = running.cache.capacity;
    }
    // Fitted to the open-file limit at start.
    keep_running(
        &mut changed,
        "limits.max_connections",
        &mut new.limits.max_connections,
        &running.limits.max_connections,
    );
    if running.tls.is_some() != new.tls.is_some() {
        changed.push("tls");
        new.tls = running.tls.clone();
    }
    if let (Some(r), Some(n)) = (&running.tls, &mut new.tls)
        && n.max_handshakes != r.max_handshakes
    {
        changed.push("tls.max_handshakes");
        n.max_handshakes = r.max_handshakes;
    }
    // A mode's background thread, miss source and peer requests are chosen at start.
    if running.coop.is_some() != new.coop.is_some() {
        changed.push("coop");
        new.coop = running.coop.clone();
    }
    if running.dc.is_some() != new.dc.is_some() {
        changed.push("dc");
        new.dc = running.dc.clone();
    }
    if let (Some(r), Some(n)) = (&running.dc, &mut new.dc) {
        keep_fixed_dc_settings(r, n, &mut changed);
    }
    changed
}

/// DC mode's settings that need the membership, the replica store or the background task's
/// periods built again.
fn keep_fixed_dc_settings(running: &DcConfig, new: &mut DcConfig, changed: &mut Vec<&'static str>) {
    keep_running(changed, "dc.servers", &mut new.servers, &running.servers);
    keep_running(changed, "dc.self", &mut new.self_name, &running.self_name);
    keep_running(changed, "dc.quota", &mut new.quota, &running.quota);
    keep_running(changed, "dc.method", &mut new.method, &running.method);
    keep_running(changed, "dc.alpha", &mut new.alpha, &running.alpha);
    keep_running(changed, "dc.ping_ms", &mut new.ping_ms, &running.ping_ms);
    keep_running(changed, "dc.balance_ms", &mut new.balance_ms, &running.balance_ms);
    keep_running(changed, "dc.seed", &mut new.seed, &running.seed);
}

/// The settings that change live and differ between `running` and `new` (after
/// `keep_fixed_settings`, with the class file loaded in both).
pub fn live_changes(running: &NodeConfig, new: &NodeConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    macro_rules! diff {
        ($a:expr, $b:expr, $name:literal) => {
            if $a != $b {
                changed.push($name);
            }
        };
    }
    let (r, n) = (running, new);
    diff!(r.cache.capacity, n.cache.capacity, "cache.capacity");
    diff!(r.cache.max_object, n.cache.max_object, "cache.max_object");
    diff!(r.cache.revalidate_ms, n.cache.revalidate_ms, "cache.revalidate_ms");
    diff!(r.classes, n.classes, "classes");
    diff!(r.seed, n.seed, "seed");
    diff!(r.server_names, n.server_names, "server_names");
    let (rl, nl) = (&r.limits, &n.limits);
    diff!(rl.header_timeout_ms, nl.header_timeout_ms, "limits.header_timeout_ms");
    diff!(rl.keepalive_timeout_ms, nl.keepalive_timeout_ms, "limits.keepalive_timeout_ms");
    diff!(rl.max_head_bytes, nl.max_head_bytes, "limits.max_head_bytes");
    diff!(rl.max_headers, nl.max_headers, "limits.max_headers");
    diff!(rl.drain_timeout_ms, nl.drain_timeout_ms, "limits.drain_timeout_ms");
    if let (Some(rc), Some(nc)) = (&r.coop, &n.coop) {
        diff!(rc.peers, nc.peers, "coop.peers");
        diff!(rc.self_url, nc.self_url, "coop.self");
        diff!(rc.timeout_ms, nc.timeout_ms, "coop.timeout_ms");
        diff!(rc.keep_copy, nc.keep_copy, "coop.keep_copy");
        diff!(rc.backoff_ms, nc.backoff_ms, "coop.backoff_ms");
    }
    if let (Some(rd), Some(nd)) = (&r.dc, &n.dc) {
        diff!(rd.theta, nd.theta, "dc.theta");
        diff!(rd.replicate, nd.replicate, "dc.replicate");
        diff!(rd.consistency, nd.consistency, "dc.consistency");
        diff!(rd.validate_s, nd.validate_s, "dc.validate_s");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coop::config::CoopConfig;
    use locus_classify::ByteSize;

    fn running() -> NodeConfig {
        NodeConfig {
            listen: "127.0.0.1:8000".parse().unwrap(),
            coop: Some(CoopConfig { peers: vec!["http://127.0.0.1:8001".into()], ..CoopConfig::default() }),
            ..NodeConfig::default()
        }
    }

    #[test]
    fn settings_that_need_a_restart_keep_their_running_value_and_are_named() {
        let running = running();
        let mut new = running.clone();
        new.listen = "127.0.0.1:9000".parse().unwrap();
        new.workers += 1;
        new.name = "other".into();
        new.root = "/elsewhere".into();
        new.cache.replacement = locus_cache::Replacement::Lfu;
        new.limits.max_connections = 5;
        new.coop = None;
        new.limits.header_timeout_ms = 7;
        let changed = keep_fixed_settings(&running, &mut new);
        assert_eq!(
            changed,
            vec!["listen", "workers", "name", "root", "cache.replacement", "limits.max_connections", "coop"]
        );
        let mut expected = running.clone();
        expected.limits.header_timeout_ms = 7;
        assert_eq!(new, expected, "everything else is the new configuration's");
        assert!(keep_fixed_settings(&running, &mut running.clone()).is_empty());
    }

    #[test]
    fn the_cache_may_grow_or_shrink_but_not_turn_on_or_off() {
        let running = running();
        let mut new = NodeConfig {
            cache: crate::config::CacheConfig { capacity: ByteSize(0), ..running.cache.clone() },
            ..running.clone()
        };
        assert_eq!(
            keep_fixed_settings(&running, &mut new),
            vec!["cache.capacity (turning the cache on or off)"]
        );
        assert_eq!(new.cache.capacity, running.cache.capacity);
        new.cache.capacity = ByteSize::kib(1);
        assert!(keep_fixed_settings(&running, &mut new).is_empty());
        assert_eq!(live_changes(&running, &new), vec!["cache.capacity"]);
    }

    #[test]
    fn dc_membership_quota_and_periods_need_a_restart_its_threshold_does_not() {
        let dc = DcConfig {
            servers: vec!["a=127.0.0.1:8000".into()],
            self_name: "a".into(),
            ..DcConfig::default()
        };
        let running = NodeConfig { coop: None, dc: Some(dc.clone()), ..running() };
        let mut new = running.clone();
        let ndc = new.dc.as_mut().unwrap();
        ndc.servers.push("b=127.0.0.1:8001".into());
        ndc.ping_ms = 5;
        ndc.theta = 0.5;
        ndc.replicate = false;
        assert_eq!(keep_fixed_settings(&running, &mut new), vec!["dc.servers", "dc.ping_ms"]);
        assert_eq!(new.dc.as_ref().unwrap().servers, dc.servers);
        assert_eq!(live_changes(&running, &new), vec!["dc.theta", "dc.replicate"]);
    }

    #[test]
    fn live_changes_name_what_differs() {
        let running = running();
        assert!(live_changes(&running, &running).is_empty());
        let mut new = running.clone();
        new.limits.keepalive_timeout_ms = 5;
        new.server_names = vec!["a.example".into()];
        new.coop.as_mut().unwrap().peers.push("http://127.0.0.1:8002".into());
        new.seed = 9;
        assert_eq!(
            live_changes(&running, &new),
            vec!["seed", "server_names", "limits.keepalive_timeout_ms", "coop.peers"]
        );
    }
}
