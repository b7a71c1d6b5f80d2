//! The simulator decides like the live switch: its recorded front-end events (assign,
//! complete, node up/down), replayed into a fresh `locus_policy::Cluster` driven exactly as
//! the switch's dispatcher drives it, give the same node for every request — for every
//! policy of the switch, with loads, reassignments, replication, admission and failures.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use locus_core::{NodeId, Time};
use locus_policy::{Cluster, PolicyConfig, build};
use locus_sim::{FrontEndEvent, FrontEndLimit, NodeEvent, SimConfig, SimPolicy, Simulation, Workload};
use locus_trace::{DocumentSizes, SizeModel, ZipfTraceSpec};

const T_LOW: u32 = 3;
const T_HIGH: u32 = 6;
const SLOW_START_MS: u64 = 400;

fn workload() -> Workload {
    Workload::synthetic(ZipfTraceSpec {
        seed: 21,
        requests: 6000,
        documents: 800,
        alpha: 1.1,
        sizes: DocumentSizes::Model(SizeModel { max_size: 300 << 10, ..SizeModel::surge() }),
        ..ZipfTraceSpec::default()
    })
    .unwrap()
}

/// The configuration the switch would have for this policy (LARD thresholds as in the sim).
fn switch_policy(policy: &SimPolicy) -> PolicyConfig {
    policy.front_end_config(T_LOW, T_HIGH).expect("a switch policy")
}

#[test]
fn simulator_decisions_equal_a_cluster_driven_like_the_switch() {
    let w = workload();
    let names =
        ["rr", "wrr", "lc", "wlc", "p2c", "hash", "chash", "maglev", "chash-bounded", "lard", "lard-r"];
    for name in names {
        let mut policy = SimPolicy::from_name(name).unwrap();
        if name == "lard-r" {
            // A short K so that replicas are also dropped within the run.
            policy = SimPolicy::Switch(PolicyConfig::LardR {
                t_low: T_LOW,
                t_high: T_HIGH,
                k_secs: 0.5,
                admission_limit: None,
                max_targets: 100_000,
            });
        }
        let config = SimConfig {
            policy: policy.clone(),
            nodes: 4,
            t_low: T_LOW,
            t_high: T_HIGH,
            slow_start_ms: SLOW_START_MS,
            frontend_limit: FrontEndLimit::Policy,
            arrivals: locus_sim::Arrivals::Closed { clients: Some(40) },
            node_events: vec![
                NodeEvent { at_s: 2.0, node: 2, up: false },
                NodeEvent { at_s: 4.0, node: 2, up: true },
                NodeEvent { at_s: 5.0, node: 0, up: false },
                NodeEvent { at_s: 6.0, node: 0, up: true },
            ],
            ..SimConfig::lard98()
        };
        let run = Simulation::new(&w, config).unwrap().recording().run().unwrap();
        let log = &run.front_end_log;
        let weights = [1u32; 4];
        let mut cluster = Cluster::new(
            build(&switch_policy(&policy), &weights).unwrap(),
            &weights,
            Duration::from_millis(SLOW_START_MS),
        );
        let (mut assigns, mut ups) = (0, 0);
        let mut nodes_of: HashMap<u32, HashSet<u32>> = HashMap::new();
        let mut last_time = 0;
        for e in log {
            match *e {
                FrontEndEvent::Assign { at, request, target, node } => {
                    assert!(at >= last_time);
                    last_time = at;
                    // The switch dispatches only while the admission limit allows.
                    assert!(cluster.can_admit(), "{name}: request {request} admitted over the limit");
                    let got = cluster.assign(&w.request_info(target), Time(at));
                    assert_eq!(got, Some(NodeId(node)), "{name}: request {request} at {at} ns");
                    nodes_of.entry(target).or_default().insert(node);
                    assigns += 1;
                }
                FrontEndEvent::Complete { at, node, target_hash } => {
                    cluster.complete(NodeId(node), target_hash, Time(at));
                }
                FrontEndEvent::SetUp { at, node, up } => {
                    cluster.set_up(NodeId(node), up, Time(at));
                    ups += 1;
                }
            }
        }
        assert_eq!(assigns, w.len(), "{name}: every request assigned once");
        assert_eq!(ups, 4, "{name}: the node events happened within the run");
        assert_eq!(cluster.in_flight(), 0, "{name}: every assignment completed");
        if name.starts_with("lard") {
            // Loads were high enough to move targets between nodes.
            let moved = nodes_of.values().filter(|s| s.len() > 1).count();
            assert!(moved > 10, "{name}: only {moved} targets ever moved");
        }
    }
}
