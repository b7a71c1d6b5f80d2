//! `locus bench proxy`'s flags as a user types them: the size sweep with binary suffixes, the
//! keep-alive choice, path names checked (with `direct` always measured), and the defaults
//! that keep the README's command meaning what it did (1 KiB and 64 KiB).

use clap::Parser;
use locus_bench::cli::{BenchCommand, ProxyArgs};

#[derive(Parser)]
struct Bench {
    #[command(subcommand)]
    cmd: BenchCommand,
}

fn proxy_args(args: &[&str]) -> ProxyArgs {
    let argv = ["bench", "proxy"].iter().chain(args).copied();
    match Bench::try_parse_from(argv).expect("flags parse").cmd {
        BenchCommand::Proxy(a) => a,
        other => panic!("not the proxy subcommand: {other:?}"),
    }
}

#[test]
fn defaults_measure_1k_and_64k_with_and_without_keepalive_on_every_path() {
    let o = proxy_args(&[]).options().unwrap();
    assert_eq!(o.sizes, [1024, 65536]);
    assert_eq!(o.keepalive, [true, false]);
    assert_eq!(
        o.paths,
        ["direct", "direct-nginx", "cf", "locus", "splice", "handoff", "l4", "haproxy", "nginx"]
    );
    assert_eq!((o.rounds, o.seconds, o.connections), (5, 3, 32));
    assert_eq!(o.congestion_control, None, "the lab's own (cubic), not the machine's");
    assert_eq!(
        proxy_args(&["--congestion-control", "bbr"]).options().unwrap().congestion_control.as_deref(),
        Some("bbr")
    );
}

#[test]
fn the_full_sweep_parses_with_suffixes() {
    let o = proxy_args(&["--sizes", "100,1k,4k,16k,64k,256k,1m", "--keepalive", "off", "--seconds", "2"])
        .options()
        .unwrap();
    assert_eq!(o.sizes, [100, 1024, 4096, 16384, 65536, 262144, 1 << 20]);
    assert_eq!(o.keepalive, [false]);
    assert_eq!(o.seconds, 2);
    assert_eq!(proxy_args(&["--keepalive", "on"]).options().unwrap().keepalive, [true]);
}

#[test]
fn bad_values_are_refused_before_anything_starts() {
    let argv = |extra: &[&'static str]| ["bench", "proxy"].iter().chain(extra).copied().collect::<Vec<_>>();
    assert!(Bench::try_parse_from(argv(&["--keepalive", "sometimes"])).is_err());
    assert!(Bench::try_parse_from(argv(&["--sizes", "1k,0"])).is_err());
    assert!(Bench::try_parse_from(argv(&["--sizes", "1g"])).is_err());
    let err = proxy_args(&["--paths", "proxy,lvs"]).options().unwrap_err().to_string();
    assert!(err.contains("unknown path `lvs`"), "{err}");
}

#[test]
fn a_subset_of_paths_is_put_in_table_order_with_direct_added() {
    let o = proxy_args(&["--paths", "nginx,splice"]).options().unwrap();
    assert_eq!(o.paths, ["direct", "splice", "nginx"]);
}
