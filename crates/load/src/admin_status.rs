//! Reading Locus admin listeners around a run: a blocking `GET` of `/locus/status` (framed
//! with locus-http), the switch's policy, mode and per-node request counters
//! (`SwitchSnapshot`) and the nodes' cache counters (`CacheSnapshot`), and what a run adds to
//! them: requests per node, their imbalance (max/mean) and the cache hit ratio.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use locus_http::{BodyTracker, ResponseHead, parse_response};
use serde::Serialize;

use crate::target_url::TargetUrl;

/// The status path read when an admin URL gives none.
pub const STATUS_PATH: &str = "/locus/status";

/// `GET path` from `url` with a fresh connection; returns the status and the whole body
/// (for small documents only: admin status, a probe). Every failure is a message.
pub fn fetch_document(url: &TargetUrl, path: &str, timeout: Duration) -> Result<(u16, Vec<u8>), String> {
    let addr = url.resolve().map_err(|e| e.to_string())?;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{url}: connect: {e}"))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", url.host_header());
    stream.write_all(request.as_bytes()).map_err(|e| format!("{url}: write: {e}"))?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    let mut head = ResponseHead::default();
    let read_more = |stream: &mut TcpStream, buf: &mut Vec<u8>, chunk: &mut [u8]| -> Result<usize, String> {
        let n = stream.read(chunk).map_err(|e| format!("{url}: read: {e}"))?;
        buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    };
    loop {
        if !buf.is_empty()
            && parse_response(&buf, 64 * 1024, false, &mut head).map_err(|e| format!("{url}: {e}"))?
        {
            if !head.is_interim() {
                break;
            }
            buf.drain(..head.head_len);
            continue;
        }
        if read_more(&mut stream, &mut buf, &mut chunk)? == 0 {
            return Err(format!("{url}: connection closed before a response"));
        }
    }
    let mut tracker = BodyTracker::new(head.body);
    let mut body = Vec::new();
    let mut rest: Vec<u8> = buf.split_off(head.head_len);
    loop {
        let progress =
            tracker.advance_with(&rest, |d| body.extend_from_slice(d)).map_err(|e| format!("{url}: {e}"))?;
        if progress.done {
            return Ok((head.status, body));
        }
        if body.len() > 64 << 20 {
            return Err(format!("{url}: response larger than 64 MiB"));
        }
        rest.clear();
        if read_more(&mut stream, &mut rest, &mut chunk)? == 0 {
            tracker.eof().map_err(|e| format!("{url}: {e}"))?;
            return Ok((head.status, body));
        }
    }
}

/// `GET /locus/status` (or the URL's own path) as JSON.
pub fn fetch_status(url: &TargetUrl, timeout: Duration) -> Result<serde_json::Value, String> {
    let path = if url.path == "/" { STATUS_PATH } else { url.path.as_str() };
    let (status, body) = fetch_document(url, path, timeout)?;
    if status != 200 {
        return Err(format!("{url}{path}: status {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}{path}: not JSON: {e}"))
}

/// What a switch's status says about policy and nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchSnapshot {
    pub policy: Option<String>,
    pub mode: Option<String>,
    /// (name, requests forwarded so far) per node.
    pub nodes: Vec<(String, u64)>,
}

impl SwitchSnapshot {
    /// Read the fields `policy`, `mode` and `nodes[].{name, requests}`.
    pub fn from_status(status: &serde_json::Value) -> Option<SwitchSnapshot> {
        let text = |k: &str| status.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let nodes = status.get("nodes")?.as_array()?;
        let nodes = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = n
                    .get("name")
                    .and_then(|v| v.as_str())
                    .map_or_else(|| format!("node{}", i + 1), str::to_string);
                (name, n.get("requests").and_then(|v| v.as_u64()).unwrap_or(0))
            })
            .collect();
        Some(SwitchSnapshot { policy: text("policy"), mode: text("mode"), nodes })
    }
}

/// Requests one node got during the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeRequests {
    pub name: String,
    pub requests: u64,
}

/// Requests per node between two snapshots (nodes matched by name; a node absent before
/// counts from zero).
pub fn node_deltas(before: &SwitchSnapshot, after: &SwitchSnapshot) -> Vec<NodeRequests> {
    after
        .nodes
        .iter()
        .map(|(name, n)| {
            let was = before.nodes.iter().find(|(b, _)| b == name).map_or(0, |(_, v)| *v);
            NodeRequests { name: name.clone(), requests: n.saturating_sub(was) }
        })
        .collect()
}

/// Max over mean of per-node requests (1.0: perfectly even); `None` without requests.
pub fn imbalance(nodes: &[NodeRequests]) -> Option<f64> {
    let total: u64 = nodes.iter().map(|n| n.requests).sum();
    if nodes.is_empty() || total == 0 {
        return None;
    }
    let mean = total as f64 / nodes.len() as f64;
    nodes.iter().map(|n| n.requests).max().map(|m| m as f64 / mean)
}

/// A node's cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheSnapshot {
    pub hits: u64,
    /// Misses, including responses that bypassed the cache.
    pub misses: u64,
}

impl CacheSnapshot {
    /// Read a Locus node's `cache_hits`, `cache_misses` and `cache_bypass` (or plain `hits`
    /// and `misses`).
    pub fn from_status(status: &serde_json::Value) -> Option<CacheSnapshot> {
        let field = |k: &str| status.get(k).and_then(|v| v.as_u64());
        let hits = field("cache_hits").or_else(|| field("hits"))?;
        let misses = field("cache_misses").or_else(|| field("misses"))? + field("cache_bypass").unwrap_or(0);
        Some(CacheSnapshot { hits, misses })
    }
}

/// Hits over hits and misses, summed over nodes, between two snapshots of each.
pub fn hit_ratio(before: &[CacheSnapshot], after: &[CacheSnapshot]) -> Option<f64> {
    if before.len() != after.len() || after.is_empty() {
        return None;
    }
    let (mut hits, mut all) = (0u64, 0u64);
    for (b, a) in before.iter().zip(after) {
        let h = a.hits.saturating_sub(b.hits);
        hits += h;
        all += h + a.misses.saturating_sub(b.misses);
    }
    (all > 0).then(|| hits as f64 / all as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn switch_snapshot_reads_policy_mode_and_node_counters() {
        let status = json!({"mode": "proxy", "policy": "lard", "nodes": [
            {"name": "a", "requests": 10}, {"name": "b", "requests": 4}, {"requests": 1}
        ]});
        let s = SwitchSnapshot::from_status(&status).unwrap();
        assert_eq!((s.policy.as_deref(), s.mode.as_deref()), (Some("lard"), Some("proxy")));
        assert_eq!(s.nodes, [("a".into(), 10), ("b".into(), 4), ("node3".into(), 1)]);
        assert!(SwitchSnapshot::from_status(&json!({"policy": "x"})).is_none());
    }

    #[test]
    fn imbalance_is_max_over_mean_of_per_node_deltas() {
        let before =
            SwitchSnapshot { policy: None, mode: None, nodes: vec![("a".into(), 100), ("b".into(), 50)] };
        let after = SwitchSnapshot {
            policy: None,
            mode: None,
            nodes: vec![("a".into(), 400), ("b".into(), 150), ("c".into(), 200)],
        };
        let d = node_deltas(&before, &after);
        assert_eq!(d.iter().map(|n| n.requests).collect::<Vec<_>>(), [300, 100, 200]);
        assert!((imbalance(&d).unwrap() - 1.5).abs() < 1e-12);
        assert_eq!(imbalance(&[]), None);
        assert_eq!(imbalance(&[NodeRequests { name: "a".into(), requests: 0 }]), None);
    }

    #[test]
    fn hit_ratio_sums_node_deltas_and_counts_bypass_as_miss() {
        let status = json!({"cache_hits": 90, "cache_misses": 5, "cache_bypass": 5});
        assert_eq!(CacheSnapshot::from_status(&status), Some(CacheSnapshot { hits: 90, misses: 10 }));
        assert_eq!(
            CacheSnapshot::from_status(&json!({"hits": 1, "misses": 2})),
            Some(CacheSnapshot { hits: 1, misses: 2 })
        );
        assert_eq!(CacheSnapshot::from_status(&json!({"requests": 1})), None);
        let before = [CacheSnapshot { hits: 10, misses: 10 }, CacheSnapshot { hits: 0, misses: 0 }];
        let after = [CacheSnapshot { hits: 40, misses: 20 }, CacheSnapshot { hits: 50, misses: 10 }];
        assert!((hit_ratio(&before, &after).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(hit_ratio(&before, &before), None);
        assert_eq!(hit_ratio(&before[..1], &after), None);
    }
}
