//! Every HAProxy and NGINX configuration the lab can write passes the program's own check
//! (`haproxy -c`, `nginx -t`), and one the program refuses fails with its alert.

use locus_rig::servers::{check_haproxy_config, check_nginx_config};
use locus_rig::{HaproxyBalance, HaproxyTuning, NginxBalance};

#[test]
fn every_haproxy_balance_and_tuning_passes_haproxy_c() {
    let dir = tempfile::tempdir().unwrap();
    let tunings = [
        HaproxyTuning::default(),
        HaproxyTuning { hash_balance_factor: 115, ..HaproxyTuning::default() },
        HaproxyTuning { hash_balance_factor: 125, avalanche: true, weight: Some(100), maxconn: None },
        HaproxyTuning { maxconn: Some(16), ..HaproxyTuning::default() },
    ];
    for balance in [
        HaproxyBalance::UriChashBounded,
        HaproxyBalance::RoundRobin,
        HaproxyBalance::LeastConn,
        HaproxyBalance::Random2,
    ] {
        for t in &tunings {
            check_haproxy_config(dir.path(), balance, t, 2)
                .unwrap_or_else(|e| panic!("{balance:?} {t:?}: {e}"));
        }
    }
}

#[test]
fn a_configuration_haproxy_refuses_fails_with_its_alert() {
    let dir = tempfile::tempdir().unwrap();
    // HAProxy's weights stop at 256.
    let t = HaproxyTuning { weight: Some(300), ..HaproxyTuning::default() };
    let e = check_haproxy_config(dir.path(), HaproxyBalance::RoundRobin, &t, 1).unwrap_err().to_string();
    assert!(e.contains("haproxy -c") && e.contains("weight"), "{e}");
}

#[test]
fn every_nginx_balance_passes_nginx_t() {
    let dir = tempfile::tempdir().unwrap();
    for balance in [
        NginxBalance::UriChash,
        NginxBalance::RoundRobin,
        NginxBalance::LeastConn,
        NginxBalance::RandomTwoLeastConn,
    ] {
        check_nginx_config(dir.path(), balance, 2).unwrap_or_else(|e| panic!("{balance:?}: {e}"));
    }
}
