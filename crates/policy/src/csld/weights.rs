//! From load indices to dispatch: W_k from L_k (the spread compressed to at most t_diff =
//! N_r/N, the weights summing to N_r), shared by CSLD and the metric-fed WRR baselines, which
//! dispatch by the smooth weighted round robin of `wrr`.

pub(crate) use crate::wrr::SmoothWrr;

/// Fill `out` with W_k for the loads `loads` of the nodes `active` says take part (the rest
/// get 0): with t_diff = `total`/N over the N active nodes, dec = 1 if max − min ≤ t_diff
/// else t_diff/(max − min), W_k = W_max − (L_k − min)·dec, and W_max chosen so that the
/// weights sum to `total` (W_k ≈ connections to give node k next period; every W_k ≥ 0).
/// All zero when nothing is active or `total` is not positive.
pub(crate) fn weights_from_loads(loads: &[f64], active: impl Fn(usize) -> bool, total: f64, out: &mut [f64]) {
    out.fill(0.0);
    let load = |k: usize| loads.get(k).copied().filter(|l| l.is_finite()).unwrap_or(0.0);
    let members = || (0..out.len()).filter(|&k| active(k));
    let n = members().count();
    if n == 0 || !(total > 0.0 && total.is_finite()) {
        return;
    }
    let min = members().map(load).fold(f64::INFINITY, f64::min);
    let max = members().map(load).fold(f64::NEG_INFINITY, f64::max);
    let t_diff = total / n as f64;
    let spread = max - min;
    let dec = if spread <= t_diff { 1.0 } else { t_diff / spread };
    let excess: f64 = members().map(|k| (load(k) - min) * dec).sum();
    let w_max = (total + excess) / n as f64;
    for k in members() {
        out[k] = (w_max - (load(k) - min) * dec).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_core::{NodeId, NodeStatus};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn weights_differ_by_at_most_t_diff_and_sum_to_n_r(
            loads in prop::collection::vec(0.0f64..1e4, 1..40),
            total in 0.01f64..1e4,
        ) {
            let mut w = vec![0.0; loads.len()];
            weights_from_loads(&loads, |_| true, total, &mut w);
            let t_diff = total / loads.len() as f64;
            let (lo, hi) = w.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
            prop_assert!(hi - lo <= t_diff * (1.0 + 1e-9), "{w:?} spread {} > {t_diff}", hi - lo);
            prop_assert!((w.iter().sum::<f64>() - total).abs() <= total * 1e-9);
            prop_assert!(lo >= 0.0);
            // A more loaded node never weighs more.
            for i in 0..loads.len() {
                for j in 0..loads.len() {
                    if loads[i] < loads[j] {
                        prop_assert!(w[i] >= w[j]);
                    }
                }
            }
        }
    }

    #[test]
    fn small_spread_keeps_load_differences_exact_and_inactive_nodes_get_nothing() {
        let mut w = vec![0.0; 4];
        // t_diff = 12 / 3 = 4 ≥ spread 2: weights differ exactly by the loads.
        weights_from_loads(&[1.0, 3.0, 99.0, 2.0], |k| k != 2, 12.0, &mut w);
        assert_eq!(w, [5.0, 3.0, 0.0, 4.0]);
        weights_from_loads(&[1.0, 3.0], |_| false, 12.0, &mut w[..2]);
        assert_eq!(&w[..2], &[0.0, 0.0]);
        weights_from_loads(&[1.0, 3.0], |_| true, 0.0, &mut w[..2]);
        assert_eq!(&w[..2], &[0.0, 0.0]);
    }

    #[test]
    fn smooth_wrr_follows_weights_and_ramp_and_falls_back_to_the_ramps() {
        let mut nodes: Vec<NodeStatus> = (0..3).map(|i| NodeStatus::new(NodeId(i))).collect();
        let mut wrr = SmoothWrr::default();
        let mut counts = [0; 3];
        for _ in 0..600 {
            counts[wrr.pick(&[3.0, 2.0, 1.0], &nodes).unwrap().index()] += 1;
        }
        assert_eq!(counts, [300, 200, 100]);
        nodes[0].ramp = 0.5;
        let mut counts = [0; 3];
        for _ in 0..300 {
            counts[wrr.pick(&[2.0, 1.0, 0.0], &nodes).unwrap().index()] += 1;
        }
        assert_eq!(counts, [150, 150, 0]);
        // No positive weight: the ramps decide (round robin at full ramp).
        let mut fresh = SmoothWrr::default();
        let mut counts = [0; 3];
        for _ in 0..400 {
            counts[fresh.pick(&[0.0; 3], &nodes).unwrap().index()] += 1;
        }
        assert_eq!(counts, [80, 160, 160]);
        nodes[0].ramp = 1.0;
        let picks: Vec<u32> = (0..4).map(|_| SmoothWrr::default().pick(&[], &nodes).unwrap().0).collect();
        assert_eq!(picks, [0, 0, 0, 0]);
        let mut fresh = SmoothWrr::default();
        let picks: Vec<u32> = (0..4).map(|_| fresh.pick(&[], &nodes).unwrap().0).collect();
        assert_eq!(picks, [0, 1, 2, 0]);
        nodes[1].up = false;
        assert!((0..10).all(|_| wrr.pick(&[0.0, 5.0, 1.0], &nodes) == Some(NodeId(2))));
        nodes.iter_mut().for_each(|n| n.up = false);
        assert_eq!(wrr.pick(&[1.0; 3], &nodes), None);
    }
}
