//! The five reproductions' claims at the reduced scale a debug CI run affords: each test runs a
//! study and asserts, per claim, `met == expected` — the set of claims met today at that scale,
//! so a change in either direction fails and is seen. The scale, and what a verdict at it means,
//! is stated beside each study; the full-scale verdicts are in docs/simulator.md. All five take
//! 75–130 s together in a debug build on a shared two-core machine (measured 2026-11-26).

use locus_sim::reproduce::Claim;

/// Assert each claim's verdict: `expected` holds (statement prefix, met) in the study's order.
/// A claim whose statement starts with none of the prefixes, or a count that differs, fails.
fn assert_verdicts(study: &str, claims: &[Claim], expected: &[(&str, bool)]) {
    let got: Vec<(String, bool)> = claims.iter().map(|c| (c.statement.to_string(), c.met)).collect();
    for c in claims {
        eprintln!("{study}: [{}] {} — {}", if c.met { "met" } else { "not met" }, c.statement, c.evidence);
    }
    assert_eq!(claims.len(), expected.len(), "{study}: claim count changed: {got:?}");
    for (c, (prefix, met)) in claims.iter().zip(expected) {
        assert!(
            c.statement.starts_with(prefix),
            "{study}: expected a claim starting {prefix:?}, got {:?}",
            c.statement
        );
        assert_eq!(
            c.met, *met,
            "{study}: {:?} was {} and is now {} — {}",
            c.statement, met, c.met, c.evidence
        );
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[test]
fn lard_claims_at_reduced_scale_keep_their_verdicts() {
    let dir = tmp();
    let opts = locus_sim::reproduce::ReproduceOptions {
        requests: 100_000,
        node_counts: vec![1, 4, 8, 16],
        progress: false,
        ..locus_sim::reproduce::ReproduceOptions::new(dir.path())
    };
    let out = locus_sim::reproduce::reproduce_lard(&opts).unwrap();
    // 100 000 requests (the study's 2 M in release) on 1, 4, 8 and 16 nodes. The trace keeps the Rice-like working set, but 100 000 requests barely warm 16
    // caches of 32 MB, so WRR's miss ratio is not yet flat (it falls as caches warm) and
    // LARD/R ÷ WRR is 3.9× at 8 and 4.9× at 16 (above the paper's two-to-four, as at full scale).
    // The two orderings (LB idler than LARD, WRR/GMS below LARD) already mean what they say here.
    assert_verdicts(
        "lard",
        &out.claims,
        &[
            ("LARD/R's throughput exceeds WRR's by a factor of two to four", false),
            ("WRR's cache miss ratio stays flat", false),
            ("LB loses load balance", true),
            ("WRR/GMS's throughput stays below LARD's", true),
        ],
    );
}

#[test]
fn csld_claims_at_reduced_scale_keep_their_verdicts() {
    let dir = tmp();
    let mut opts = locus_sim::reproduce::csld::CsldOptions::quick(dir.path());
    opts.progress = false;
    let out = locus_sim::reproduce::csld::reproduce_csld(&opts).unwrap();
    // 1 s warm-up + 2 s measured per point (the study's 60 s + 180 s in release). At this scale
    // the heavy cases have not reached their steady state, so the orderings of Table 4 mostly do not hold and these verdicts say little
    // about the paper's claims: they are asserted so that a change in the model or the
    // policies, in either direction, is seen. Only Fig. 6's trend is met at this scale.
    assert_verdicts(
        "csld",
        &out.claims,
        &[
            ("WRR_i (ideal metrics) is the best policy", false),
            ("CSLD beats RR in every case", false),
            ("CSLD's gain over RR is large", false),
            ("CSLD beats WRR_a", false),
            ("CSLD comes within 25% of the ideal WRR_i", false),
            ("In the light cases 1, 3, 5 CSLD", false),
            ("Polling less often costs", false),
            ("WRR_b is worse than plain RR", false),
            ("Costly frequent polling", false),
            ("LC is worse than RR", false),
            ("WRR_p (probe only)", false),
            ("RR has no rejections", false),
            ("Table 5: RR's latency rises", false),
            ("Fig. 6: CSLD's gain over RR grows", true),
            ("Fig. 6 at 6.3 K/s: rejections", false),
        ],
    );
}

#[test]
fn cap_claims_at_reduced_scale_keep_their_verdicts() {
    let dir = tmp();
    let mut opts = locus_sim::reproduce::csld::CsldOptions::quick(dir.path());
    opts.progress = false;
    let out = locus_sim::reproduce::cap::reproduce_cap(&opts).unwrap();
    // CAP's study on the same 1 s + 2 s points as csld's quick run. The static
    // workload's locality and the mixes' orderings hold already; the threshold claim needs
    // LARD/R's latency to vary by 25% over its thresholds, which 2 s do not show.
    assert_verdicts(
        "cap",
        &out.claims,
        &[
            ("On a static Web-publishing workload LARD/R", true),
            ("On a mix of CPU- and disk-bound dynamic requests CAP beats LARD", true),
            ("On the mix CAP beats the load-balancing policies", true),
            ("CAP needs no tuning", false),
        ],
    );
}

#[test]
fn sc_claims_at_reduced_scale_keep_their_verdicts() {
    let dir = tmp();
    let opts = locus_sim::reproduce::sc::ScOptions {
        requests: 60_000,
        node_counts: vec![1, 4, 8, 12],
        sensitivity_mbps: Vec::new(),
        progress: false,
        ..locus_sim::reproduce::sc::ScOptions::full(dir.path())
    };
    let out = locus_sim::reproduce::sc::reproduce_sc(&opts).unwrap();
    // 60 000 requests (1.5% of the Berkeley-like trace) on 1, 4, 8 and 12 nodes at the headline's
    // 100 Mbps file-server link, no rate sweep. At 100 Mbps the file server's
    // link saturates early, so RR is flat from 8 nodes (met, by construction) and CF is above
    // RR up to 8 nodes (not met, as at full scale); the 12-node ordering and two of the three
    // ratios are not met at this scale.
    assert_verdicts(
        "sc",
        &out.claims,
        &[
            ("With 12 nodes SC has the highest throughput", false),
            ("With 12 nodes SC outperforms CF-LFU by 30%", true),
            ("With 12 nodes SC outperforms CF-LRU by 64%", false),
            ("With 12 nodes SC outperforms RR by 96%", false),
            ("RR's throughput stops rising beyond 8 nodes", true),
            ("Cooperative caching is not above RR", false),
            ("Cooperative caching with LFU", false),
        ],
    );
}

#[test]
fn dc_claims_at_reduced_scale_keep_their_verdicts() {
    let dir = tmp();
    let opts = locus_sim::reproduce::dc::DcOptions::quick(dir.path());
    let out = locus_sim::reproduce::dc::reproduce_dc(&opts).unwrap();
    // 5% of the data sets, 1, 2 and 4 servers, 32 surfers, 20 s + 20 s (the study's full run
    // is 1–16 servers). The Fig. 7/8 claims (scaling) are not met at this size; the two Fig. 9
    // claims on the quota's ends (quota 0 = one server, by construction; a quota holding
    // everything) are met; the orderings of Fig. 9 are not.
    assert_verdicts(
        "dc",
        &out.claims,
        &[
            ("Fig. 7: CPS grows near-linearly", false),
            ("Fig. 7: MAPUG under migration only", false),
            ("Fig. 8: mean response time", false),
            ("Fig. 9: quota 0 gives one-server performance", true),
            ("Fig. 9: a quota holding the whole replicated set", true),
            ("Fig. 9(a): SpecWeb — Resource-Aware", false),
            ("Fig. 9(a): SpecWeb — Naive drops", false),
            ("Fig. 9(b): Sequoia", false),
        ],
    );
}
