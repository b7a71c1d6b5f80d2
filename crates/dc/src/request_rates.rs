//! A home's per-document request rates for balancing: requests are counted in the current
//! window, each window end folds the counts into a per-document EWMA rate (requests per second),
//! and the candidates for replication are the most requested documents covering a share of all
//! recent requests.

use std::collections::HashMap;
use std::sync::Arc;

/// Rates below this (requests per second) with no request in the window are forgotten.
const FORGET_BELOW: f64 = 1e-3;

/// Per-document request counts and smoothed rates of one home.
#[derive(Debug, Clone, Default)]
pub struct RequestRates {
    alpha: f64,
    window: HashMap<Arc<str>, u64>,
    rates: HashMap<Arc<str>, f64>,
}

impl RequestRates {
    /// Rates smoothed as `r <- alpha*r + (1-alpha)*count/seconds` at each window end
    /// (`alpha` is clamped to `0..=1`).
    pub fn new(alpha: f64) -> RequestRates {
        let alpha = if alpha.is_nan() { 0.0 } else { alpha.clamp(0.0, 1.0) };
        RequestRates { alpha, ..RequestRates::default() }
    }

    /// Counts one request for `path` in the current window.
    pub fn record(&mut self, path: &str) {
        match self.window.get_mut(path) {
            Some(count) => *count += 1,
            None => {
                self.window.insert(path.into(), 1);
            }
        }
    }

    /// Requests counted in the current window.
    pub fn window_total(&self) -> u64 {
        self.window.values().sum()
    }

    /// Ends the window, which lasted `seconds` (a non-positive length counts as 1 s).
    pub fn end_window(&mut self, seconds: f64) {
        let seconds = if seconds > 0.0 { seconds } else { 1.0 };
        let alpha = self.alpha;
        for rate in self.rates.values_mut() {
            *rate *= alpha;
        }
        for (path, count) in self.window.drain() {
            *self.rates.entry(path).or_insert(0.0) += (1.0 - alpha) * count as f64 / seconds;
        }
        self.rates.retain(|_, rate| *rate >= FORGET_BELOW);
    }

    /// The smoothed rate of `path` (0 if unknown).
    pub fn rate(&self, path: &str) -> f64 {
        self.rates.get(path).copied().unwrap_or(0.0)
    }

    /// The most requested documents, highest rate first (ties by path), until they cover
    /// `coverage` of the total rate, at most `max`.
    pub fn candidates(&self, coverage: f64, max: usize) -> Vec<(Arc<str>, f64)> {
        let mut all: Vec<(Arc<str>, f64)> = self.rates.iter().map(|(p, &r)| (p.clone(), r)).collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let goal = coverage * all.iter().map(|(_, r)| r).sum::<f64>();
        let mut covered = 0.0;
        let mut chosen = Vec::new();
        for (path, rate) in all {
            if chosen.len() >= max || covered >= goal {
                break;
            }
            covered += rate;
            chosen.push((path, rate));
        }
        chosen
    }

    /// Number of documents with a rate.
    pub fn len(&self) -> usize {
        self.rates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rates.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates_with(counts: &[(&str, u64)]) -> RequestRates {
        let mut r = RequestRates::new(0.0);
        for &(path, n) in counts {
            for _ in 0..n {
                r.record(path);
            }
        }
        r.end_window(1.0);
        r
    }

    #[test]
    fn window_counts_fold_into_a_smoothed_rate_per_second() {
        let mut r = RequestRates::new(0.5);
        for _ in 0..10 {
            r.record("/a");
        }
        assert_eq!(r.window_total(), 10);
        r.end_window(5.0);
        assert_eq!(r.rate("/a"), 1.0);
        r.end_window(5.0);
        assert_eq!(r.rate("/a"), 0.5);
        assert_eq!(r.window_total(), 0);
    }

    #[test]
    fn idle_documents_are_forgotten() {
        let mut r = rates_with(&[("/a", 1)]);
        r.end_window(1.0);
        assert!(r.is_empty());
    }

    #[test]
    fn candidates_cover_ninety_percent_most_requested_first() {
        let r = rates_with(&[("/a", 50), ("/b", 30), ("/c", 15), ("/d", 5)]);
        let names: Vec<String> = r.candidates(0.9, 100).iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(names, ["/a", "/b", "/c"]);
        assert_eq!(r.candidates(0.9, 2).len(), 2);
        assert!(RequestRates::new(0.5).candidates(0.9, 100).is_empty());
    }
}
