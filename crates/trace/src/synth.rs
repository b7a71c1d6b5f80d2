//! Synthetic traces: `ZipfTraceSpec` describes one (Zipf popularity over a document set,
//! SURGE or on-disk sizes, one-timers, hot targets in a window, dynamic classes, Poisson
//! arrivals) and `ZipfTraceGenerator` streams its records, the same for the same seed.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Zipf};
use serde::Serialize;

use crate::error::TraceError;
use crate::record::TraceRecord;
use crate::size_model::{SizeModel, SizeSampler};
use locus_site::DocumentFile;

/// Where document sizes come from.
#[derive(Clone, Debug)]
pub enum DocumentSizes {
    /// Drawn from a size model; documents are named `/doc/<n>`.
    Model(SizeModel),
    /// Real files (e.g. `DocumentTree::scan(root)?.files`): their targets and sizes.
    Files(Vec<DocumentFile>),
}

/// How request times are made.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Arrivals {
    /// No times (closed-loop replay).
    None,
    /// Open loop: a Poisson process of `rate` requests per second, the first at time 0.
    Poisson {
        /// Requests per second.
        rate: f64,
    },
}

/// When hot targets are requested.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum HotWindow {
    /// Requests with index in `start..end` (0-based position in the trace).
    Requests {
        /// First request index in the window.
        start: u64,
        /// First request index after the window.
        end: u64,
    },
    /// Requests with time in `start..end` seconds (needs `Arrivals::Poisson`).
    Seconds {
        /// Window start (inclusive).
        start: f64,
        /// Window end (exclusive).
        end: f64,
    },
}

/// A small set of targets that get a given share of the requests during a window (the LARD
/// paper's experiment with artificial high-frequency targets added to a trace).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HotTargetSpec {
    /// How many hot targets (`/hot/<n>`), requested uniformly among themselves.
    pub targets: u32,
    /// Share of the requests inside the window that go to a hot target.
    pub share: f64,
    /// Size of each hot target in bytes.
    pub size: u64,
    /// When.
    pub window: HotWindow,
}

/// A share of requests that are dynamic, of one cost class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DynamicClassSpec {
    /// The cost class (`TraceRecord::class`).
    pub class: u16,
    /// Share of all requests (outside hot traffic).
    pub share: f64,
}

/// A synthetic trace. Per request: inside the hot window, with probability `hot.share` a hot
/// target; otherwise, with probability `one_timer_share` a one-timer, with probability
/// `dynamic[k].share` a dynamic request of that class, else a document by Zipf popularity.
#[derive(Clone, Debug)]
pub struct ZipfTraceSpec {
    /// RNG seed: the same spec and seed give the same trace.
    pub seed: u64,
    /// Number of requests.
    pub requests: u64,
    /// Documents N in the Zipf set (with `DocumentSizes::Files`: a seeded sample of N files,
    /// 0 = all files).
    pub documents: u64,
    /// Zipf exponent: document of popularity rank r is requested ∝ 1/r^alpha.
    pub alpha: f64,
    /// Document sizes.
    pub sizes: DocumentSizes,
    /// Share of requests to one-timers, targets requested exactly once: `/once/<n>` with a
    /// model size, or with `Files` an existing file with a unique query (`/a.html?once=<n>`),
    /// so the trace still replays against the directory.
    pub one_timer_share: f64,
    /// Hot targets, if any.
    pub hot: Option<HotTargetSpec>,
    /// Dynamic requests per cost class: `/cgi-bin/class<k>?id=<n>`, `n` a Zipf document rank.
    pub dynamic: Vec<DynamicClassSpec>,
    /// Response size of dynamic requests in bytes.
    pub dynamic_size: u64,
    /// Request times.
    pub arrivals: Arrivals,
    /// Clients: each request gets a uniformly random client id in `0..clients`.
    pub clients: u32,
}

impl Default for ZipfTraceSpec {
    fn default() -> Self {
        ZipfTraceSpec {
            seed: 1,
            requests: 100_000,
            documents: 10_000,
            alpha: 0.8,
            sizes: DocumentSizes::Model(SizeModel::surge()),
            one_timer_share: 0.0,
            hot: None,
            dynamic: Vec::new(),
            dynamic_size: 4096,
            arrivals: Arrivals::None,
            clients: 100,
        }
    }
}

/// Streams the records of a `ZipfTraceSpec`.
pub struct ZipfTraceGenerator {
    spec: ZipfTraceSpec,
    rng: SmallRng,
    zipf: Zipf<f64>,
    /// Document index of each popularity rank: a seeded shuffle, so rank and size are unrelated.
    rank_to_doc: Vec<u32>,
    /// Model sizes of the documents (empty with `Files`).
    model_sizes: Vec<u64>,
    sampler: Option<SizeSampler>,
    gap: Option<Exp<f64>>,
    index: u64,
    time: f64,
    one_timers: u64,
}

const SPEC: &str = "synthetic trace spec";

impl ZipfTraceGenerator {
    /// Check `spec` and prepare the document set (sizes and the popularity shuffle).
    pub fn new(spec: ZipfTraceSpec) -> Result<ZipfTraceGenerator, TraceError> {
        let share_ok = |s: f64| (0.0..=1.0).contains(&s);
        if !(spec.alpha.is_finite() && spec.alpha >= 0.0) {
            return Err(TraceError::spec(SPEC, format!("alpha {} must be finite and >= 0", spec.alpha)));
        }
        if !share_ok(spec.one_timer_share) {
            return Err(TraceError::spec(
                SPEC,
                format!("one-timer share {} is not within 0..=1", spec.one_timer_share),
            ));
        }
        let mut total = spec.one_timer_share;
        for d in &spec.dynamic {
            if !share_ok(d.share) {
                return Err(TraceError::spec(
                    SPEC,
                    format!("dynamic class {} share {} is not within 0..=1", d.class, d.share),
                ));
            }
            total += d.share;
        }
        if total > 1.0 + 1e-9 {
            return Err(TraceError::spec(
                SPEC,
                format!("one-timer and dynamic shares add up to {total} > 1"),
            ));
        }
        if spec.clients == 0 {
            return Err(TraceError::spec(SPEC, "clients must be at least 1"));
        }
        let gap = match spec.arrivals {
            Arrivals::None => None,
            Arrivals::Poisson { rate } => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(TraceError::spec(
                        SPEC,
                        format!("arrival rate {rate} must be a positive number"),
                    ));
                }
                Some(Exp::new(rate).map_err(|e| TraceError::spec(SPEC, e.to_string()))?)
            }
        };
        if let Some(hot) = &spec.hot {
            if hot.targets == 0 || !share_ok(hot.share) {
                return Err(TraceError::spec(SPEC, "hot targets need a count >= 1 and a share within 0..=1"));
            }
            match hot.window {
                HotWindow::Seconds { start, end } => {
                    if gap.is_none() {
                        return Err(TraceError::spec(SPEC, "a hot window in seconds needs Poisson arrivals"));
                    }
                    if !(start.is_finite() && end.is_finite() && start <= end) {
                        return Err(TraceError::spec(
                            SPEC,
                            format!("hot window {start}..{end} s is empty or reversed"),
                        ));
                    }
                }
                HotWindow::Requests { start, end } if start > end => {
                    return Err(TraceError::spec(SPEC, format!("hot window {start}..{end} is reversed")));
                }
                HotWindow::Requests { .. } => {}
            }
        }
        let mut rng = SmallRng::seed_from_u64(spec.seed);
        let (documents, model_sizes, sampler) = match &spec.sizes {
            DocumentSizes::Model(model) => {
                let sampler = model.sampler()?;
                if spec.documents == 0 || spec.documents > u64::from(u32::MAX) {
                    return Err(TraceError::spec(
                        SPEC,
                        format!("documents {} must be in 1..=2^32-1", spec.documents),
                    ));
                }
                let sizes: Vec<u64> = (0..spec.documents).map(|_| sampler.sample(&mut rng)).collect();
                (spec.documents, sizes, Some(sampler))
            }
            DocumentSizes::Files(files) => {
                let n = if spec.documents == 0 { files.len() as u64 } else { spec.documents };
                if files.is_empty() || n > files.len() as u64 || files.len() as u64 > u64::from(u32::MAX) {
                    return Err(TraceError::spec(
                        SPEC,
                        format!("{} documents asked for but the directory has {} files", n, files.len()),
                    ));
                }
                (n, Vec::new(), None)
            }
        };
        let zipf =
            Zipf::new(documents as f64, spec.alpha).map_err(|e| TraceError::spec(SPEC, e.to_string()))?;
        // With fewer documents than files, the document set is a seeded sample of the files.
        let pool = match &spec.sizes {
            DocumentSizes::Model(_) => documents as usize,
            DocumentSizes::Files(files) => files.len(),
        };
        let mut rank_to_doc: Vec<u32> = (0..pool as u32).collect();
        rank_to_doc.shuffle(&mut rng);
        rank_to_doc.truncate(documents as usize);
        Ok(ZipfTraceGenerator {
            spec,
            rng,
            zipf,
            rank_to_doc,
            model_sizes,
            sampler,
            gap,
            index: 0,
            time: 0.0,
            one_timers: 0,
        })
    }

    /// The spec.
    pub fn spec(&self) -> &ZipfTraceSpec {
        &self.spec
    }

    /// The target and size of the document of popularity rank `rank` (0 = most popular).
    pub fn document_at_rank(&self, rank: u64) -> (String, u64) {
        let doc = self.rank_to_doc[rank as usize] as usize;
        match &self.spec.sizes {
            DocumentSizes::Model(_) => (format!("/doc/{doc}"), self.model_sizes[doc]),
            DocumentSizes::Files(files) => (files[doc].target.clone(), files[doc].size),
        }
    }

    fn zipf_rank(&mut self) -> u64 {
        // Samples are integers in 1..=N as floats.
        (self.zipf.sample(&mut self.rng) as u64).saturating_sub(1).min(self.rank_to_doc.len() as u64 - 1)
    }

    fn in_hot_window(&self, hot: &HotTargetSpec) -> bool {
        match hot.window {
            HotWindow::Requests { start, end } => (start..end).contains(&self.index),
            HotWindow::Seconds { start, end } => self.time >= start && self.time < end,
        }
    }
}

impl Iterator for ZipfTraceGenerator {
    type Item = TraceRecord;

    fn next(&mut self) -> Option<TraceRecord> {
        if self.index >= self.spec.requests {
            return None;
        }
        if self.index > 0
            && let Some(gap) = &self.gap
        {
            self.time += gap.sample(&mut self.rng);
        }
        let time = self.gap.is_some().then_some(self.time);
        let client = self.rng.random_range(0..self.spec.clients);
        let mut record = TraceRecord { time, client, ..TraceRecord::get(String::new(), 0) };
        let hot = self.spec.hot.filter(|h| self.in_hot_window(h));
        if let Some(hot) = hot
            && self.rng.random::<f64>() < hot.share
        {
            record.target = format!("/hot/{}", self.rng.random_range(0..hot.targets));
            record.size = hot.size;
        } else {
            let mut u = self.rng.random::<f64>();
            if u < self.spec.one_timer_share {
                let n = self.one_timers;
                self.one_timers += 1;
                match &self.spec.sizes {
                    DocumentSizes::Model(_) => {
                        record.target = format!("/once/{n}");
                        record.size = self.sampler.as_ref().expect("model sampler").sample(&mut self.rng);
                    }
                    DocumentSizes::Files(files) => {
                        let f = &files[self.rng.random_range(0..files.len())];
                        record.target = format!("{}?once={n}", f.target);
                        record.size = f.size;
                    }
                }
            } else {
                u -= self.spec.one_timer_share;
                let class = self.spec.dynamic.iter().find(|d| {
                    let hit = u < d.share;
                    u -= d.share;
                    hit
                });
                if let Some(d) = class.copied() {
                    let id = self.zipf_rank();
                    record.target = format!("/cgi-bin/class{}?id={id}", d.class);
                    record.size = self.spec.dynamic_size;
                    record.class = Some(d.class);
                } else {
                    let rank = self.zipf_rank();
                    let (target, size) = self.document_at_rank(rank);
                    record.target = target;
                    record.size = size;
                }
            }
        }
        self.index += 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.spec.requests - self.index).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn generate(spec: ZipfTraceSpec) -> Vec<TraceRecord> {
        ZipfTraceGenerator::new(spec).unwrap().collect()
    }

    fn counts(records: &[TraceRecord]) -> HashMap<&str, u64> {
        let mut m = HashMap::new();
        for r in records {
            *m.entry(r.target.as_str()).or_insert(0) += 1;
        }
        m
    }

    #[test]
    fn same_seed_gives_identical_traces_and_another_seed_a_different_one() {
        let spec = ZipfTraceSpec {
            requests: 5000,
            documents: 500,
            one_timer_share: 0.1,
            dynamic: vec![DynamicClassSpec { class: 2, share: 0.05 }],
            arrivals: Arrivals::Poisson { rate: 100.0 },
            ..ZipfTraceSpec::default()
        };
        let a = generate(spec.clone());
        let b = generate(spec.clone());
        assert_eq!(a, b);
        let c = generate(ZipfTraceSpec { seed: 2, ..spec });
        assert_ne!(a, c);
        assert_eq!(a.len(), 5000);
    }

    #[test]
    fn zipf_alpha_one_gives_the_top_document_its_harmonic_share() {
        let n = 1000u64;
        let requests = 200_000u64;
        let records =
            generate(ZipfTraceSpec { requests, documents: n, alpha: 1.0, ..ZipfTraceSpec::default() });
        let harmonic: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
        let expected = 1.0 / harmonic; // ≈ 0.1336
        let mut by_count: Vec<u64> = counts(&records).into_values().collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top = by_count[0] as f64 / requests as f64;
        assert!((top - expected).abs() < 0.01, "top share {top}, expected {expected}");
        let second = by_count[1] as f64 / requests as f64;
        assert!((second - expected / 2.0).abs() < 0.01, "second share {second}");
    }

    #[test]
    fn popularity_rank_is_decorrelated_from_size_and_document_order() {
        let generator =
            ZipfTraceGenerator::new(ZipfTraceSpec { documents: 1000, ..ZipfTraceSpec::default() }).unwrap();
        let top: Vec<String> = (0..10).map(|r| generator.document_at_rank(r).0).collect();
        let in_order: Vec<String> = (0..10).map(|d| format!("/doc/{d}")).collect();
        assert_ne!(top, in_order, "the most popular documents are the first ones");
        // Sizes of the 100 most popular documents are not sorted either way.
        let sizes: Vec<u64> = (0..100).map(|r| generator.document_at_rank(r).1).collect();
        assert!(!sizes.is_sorted() && !sizes.iter().rev().is_sorted());
    }

    #[test]
    fn one_timer_share_is_respected_and_one_timers_are_requested_once() {
        let records =
            generate(ZipfTraceSpec { requests: 50_000, one_timer_share: 0.2, ..ZipfTraceSpec::default() });
        let once: Vec<&TraceRecord> = records.iter().filter(|r| r.target.starts_with("/once/")).collect();
        let share = once.len() as f64 / records.len() as f64;
        assert!((share - 0.2).abs() < 0.01, "one-timer share {share}");
        let c = counts(&records);
        assert!(once.iter().all(|r| c[r.target.as_str()] == 1));
    }

    #[test]
    fn hot_targets_get_their_share_inside_the_window_and_nothing_outside() {
        let hot = HotTargetSpec {
            targets: 3,
            share: 0.3,
            size: 100_000,
            window: HotWindow::Requests { start: 10_000, end: 20_000 },
        };
        let records =
            generate(ZipfTraceSpec { requests: 30_000, hot: Some(hot), ..ZipfTraceSpec::default() });
        let is_hot = |r: &TraceRecord| r.target.starts_with("/hot/");
        let inside = records[10_000..20_000].iter().filter(|r| is_hot(r)).count() as f64 / 10_000.0;
        assert!((inside - 0.3).abs() < 0.02, "hot share in window {inside}");
        assert!(!records[..10_000].iter().any(is_hot) && !records[20_000..].iter().any(is_hot));
        assert!(records.iter().filter(|r| is_hot(r)).all(|r| r.size == 100_000));
        assert_eq!(
            records
                .iter()
                .filter(|r| is_hot(r))
                .map(|r| &r.target)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            3
        );
    }

    #[test]
    fn hot_window_in_seconds_follows_poisson_times() {
        let hot = HotTargetSpec {
            targets: 1,
            share: 0.5,
            size: 10,
            window: HotWindow::Seconds { start: 10.0, end: 20.0 },
        };
        let records = generate(ZipfTraceSpec {
            requests: 6000,
            hot: Some(hot),
            arrivals: Arrivals::Poisson { rate: 200.0 },
            ..ZipfTraceSpec::default()
        });
        let times: Vec<f64> = records.iter().map(|r| r.time.unwrap()).collect();
        assert!(times.is_sorted() && times[0] == 0.0);
        let duration = times[times.len() - 1];
        assert!((duration - 30.0).abs() < 2.0, "6000 requests at 200/s lasted {duration} s");
        for r in records.iter().filter(|r| r.target.starts_with("/hot/")) {
            let t = r.time.unwrap();
            assert!((10.0..20.0).contains(&t), "hot request at {t} s");
        }
        let window: Vec<&TraceRecord> =
            records.iter().filter(|r| (10.0..20.0).contains(&r.time.unwrap())).collect();
        let share =
            window.iter().filter(|r| r.target.starts_with("/hot/")).count() as f64 / window.len() as f64;
        assert!((share - 0.5).abs() < 0.05, "{share}");
    }

    #[test]
    fn dynamic_requests_carry_their_class_in_target_and_record() {
        let records = generate(ZipfTraceSpec {
            requests: 20_000,
            dynamic: vec![
                DynamicClassSpec { class: 1, share: 0.1 },
                DynamicClassSpec { class: 5, share: 0.05 },
            ],
            ..ZipfTraceSpec::default()
        });
        for (class, expected) in [(1u16, 0.1), (5, 0.05)] {
            let of_class: Vec<_> = records.iter().filter(|r| r.class == Some(class)).collect();
            let share = of_class.len() as f64 / records.len() as f64;
            assert!((share - expected).abs() < 0.01, "class {class}: {share}");
            assert!(of_class.iter().all(|r| r.target.starts_with(&format!("/cgi-bin/class{class}?id="))));
        }
    }

    #[test]
    fn file_sizes_come_from_the_given_documents_and_one_timers_query_real_files() {
        let files: Vec<DocumentFile> = (0..20)
            .map(|i| DocumentFile {
                target: format!("/f{i}.html"),
                path: format!("f{i}.html").into(),
                size: 100 + i,
                mtime: 0,
            })
            .collect();
        let records = generate(ZipfTraceSpec {
            requests: 2000,
            documents: 0,
            one_timer_share: 0.1,
            sizes: DocumentSizes::Files(files.clone()),
            ..ZipfTraceSpec::default()
        });
        for r in &records {
            let path = r.target.split('?').next().unwrap();
            let f = files.iter().find(|f| f.target == path).expect("a real file");
            assert_eq!(r.size, f.size);
        }
        assert!(records.iter().any(|r| r.target.contains("?once=")));
        // Five documents of twenty files: a seeded sample, not the first five by name.
        let records = generate(ZipfTraceSpec {
            requests: 2000,
            documents: 5,
            sizes: DocumentSizes::Files(files.clone()),
            ..ZipfTraceSpec::default()
        });
        let distinct: std::collections::BTreeSet<&str> = records.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(distinct.len(), 5);
        let first_five: std::collections::BTreeSet<&str> =
            files[..5].iter().map(|f| f.target.as_str()).collect();
        assert_ne!(distinct, first_five);
    }

    #[test]
    fn inconsistent_specs_are_refused() {
        let bad = |spec: ZipfTraceSpec| ZipfTraceGenerator::new(spec).is_err();
        assert!(bad(ZipfTraceSpec { alpha: -1.0, ..ZipfTraceSpec::default() }));
        assert!(bad(ZipfTraceSpec {
            one_timer_share: 0.7,
            dynamic: vec![DynamicClassSpec { class: 0, share: 0.4 }],
            ..ZipfTraceSpec::default()
        }));
        assert!(bad(ZipfTraceSpec { arrivals: Arrivals::Poisson { rate: 0.0 }, ..ZipfTraceSpec::default() }));
        assert!(bad(ZipfTraceSpec {
            hot: Some(HotTargetSpec {
                targets: 1,
                share: 0.1,
                size: 1,
                window: HotWindow::Seconds { start: 0.0, end: 1.0 }
            }),
            ..ZipfTraceSpec::default()
        }));
        assert!(bad(ZipfTraceSpec { sizes: DocumentSizes::Files(Vec::new()), ..ZipfTraceSpec::default() }));
    }
}
