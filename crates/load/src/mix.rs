//! The request mix of a synthetic workload around its popularity draw: `RequestMix` holds the
//! dynamic targets (their interned `{path}?id={k}` templates and shares) and the hot spot;
//! `HotSet` is one feed's cache of the current phase's hot documents. Draws take the phase as
//! an input (the feed works it out from the run's start), and a phase's hot set depends only
//! on the seed and the phase, so every connection and thread sees the same one at once.

use std::time::Duration;

use locus_classify::dynamic_body;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::config::{DynamicTarget, HotSpot, LoadConfig, Verification};
use crate::error::LoadError;
use crate::verifier::Expectation;
use crate::workload::{RequestTemplate, TemplateTable};

/// Largest dynamic response body.
pub const MAX_DYNAMIC_SIZE: u64 = 64 << 20;
/// Most `id` values of one dynamic target (each is a pre-rendered request).
pub const MAX_DYNAMIC_VARIANTS: u32 = 1_000_000;
/// Most dynamic body bytes generated and hashed before a verified run (variants × size).
const MAX_DYNAMIC_HASHED: u64 = 4 << 30;
/// Tolerance on the sum of the dynamic shares (decimal shares rarely add up exactly).
const SHARE_SLACK: f64 = 1e-9;
/// Salt of the hot sets' generator, so it draws apart from the popularity order's.
const HOT_SET_SALT: u64 = 0x686f_742d_7370_6f74;

/// Check a hot spot's settings (the document count against the set is checked at build).
pub fn check_hot_spot(hot: &HotSpot) -> Result<(), LoadError> {
    if !(hot.share > 0.0 && hot.share <= 1.0) {
        return Err(LoadError::config(format!("hot_spot.share must be within (0, 1], not {}", hot.share)));
    }
    if hot.documents == 0 {
        return Err(LoadError::config("hot_spot.documents must be at least 1"));
    }
    if hot.shift.is_some_and(|d| d.is_zero()) {
        return Err(LoadError::config("hot_spot.shift must be positive when given"));
    }
    Ok(())
}

/// Check the dynamic targets; `verified`: their bodies are generated and hashed before the run.
pub fn check_dynamic(targets: &[DynamicTarget], verified: bool) -> Result<(), LoadError> {
    let mut total = 0.0;
    let mut hashed = 0u64;
    for (i, t) in targets.iter().enumerate() {
        let fail = |m: String| Err(LoadError::config(format!("dynamic[{i}] ({}): {m}", t.path)));
        if !(t.share > 0.0 && t.share <= 1.0) {
            return fail(format!("share must be within (0, 1], not {}", t.share));
        }
        if !t.path.starts_with('/') || t.path.bytes().any(|b| !b.is_ascii_graphic() || b == b'?' || b == b'#')
        {
            return fail("path must start with `/` and hold visible ASCII without `?` or `#`".into());
        }
        if !(1..=MAX_DYNAMIC_VARIANTS).contains(&t.variants) {
            return fail(format!("variants must be within 1..={MAX_DYNAMIC_VARIANTS}, not {}", t.variants));
        }
        if t.size > MAX_DYNAMIC_SIZE {
            return fail(format!("size must be at most 64 MiB, not {} bytes", t.size));
        }
        total += t.share;
        hashed = hashed.saturating_add(u64::from(t.variants).saturating_mul(t.size));
    }
    if total > 1.0 + SHARE_SLACK {
        return Err(LoadError::config(format!("dynamic shares must sum to at most 1, not {total}")));
    }
    if verified && hashed > MAX_DYNAMIC_HASHED {
        return Err(LoadError::config(format!(
            "dynamic variants × size sum to {hashed} bytes, more than the 4 GiB hashed before a verified \
             run: lower variants or size"
        )));
    }
    Ok(())
}

/// One dynamic target: its templates (index `k` is `{path}?id={k}`) and where its share ends
/// on the cumulative scale.
#[derive(Clone, Debug)]
struct DynamicChoice {
    upto: f64,
    templates: Box<[u32]>,
    size: u64,
}

/// The hot spot, ready to draw from.
#[derive(Clone, Debug)]
struct HotSpotPlan {
    documents: usize,
    share: f64,
    shift: Option<Duration>,
    seed: u64,
}

/// What a synthetic workload mixes into its popularity draw.
#[derive(Clone, Debug)]
pub struct RequestMix {
    dynamic: Box<[DynamicChoice]>,
    /// Sum of the dynamic shares.
    dynamic_share: f64,
    hot: Option<HotSpotPlan>,
}

impl RequestMix {
    /// The mix of `config` over `documents` static documents, its dynamic templates interned
    /// in `table`; `None` when there is nothing to mix in.
    pub fn build(
        table: &mut TemplateTable,
        config: &LoadConfig,
        documents: usize,
    ) -> Result<Option<RequestMix>, LoadError> {
        if config.hot_spot.is_none() && config.dynamic.is_empty() {
            return Ok(None);
        }
        check_dynamic(&config.dynamic, !matches!(config.verification, Verification::Off))?;
        let hot = match &config.hot_spot {
            None => None,
            Some(h) => {
                check_hot_spot(h)?;
                if h.documents as usize > documents {
                    return Err(LoadError::config(format!(
                        "hot_spot.documents ({}) exceeds the document set's {documents} documents",
                        h.documents
                    )));
                }
                Some(HotSpotPlan {
                    documents: h.documents as usize,
                    share: h.share,
                    shift: h.shift,
                    seed: config.seed,
                })
            }
        };
        let mut upto = 0.0;
        let mut dynamic = Vec::with_capacity(config.dynamic.len());
        for t in &config.dynamic {
            upto += t.share;
            let templates = (0..t.variants)
                .map(|k| {
                    let i = table.intern(locus_core::Method::Get, &format!("{}?id={k}", t.path));
                    table.templates[i as usize].dynamic = true;
                    i
                })
                .collect();
            dynamic.push(DynamicChoice { upto, templates, size: t.size });
        }
        Ok(Some(RequestMix { dynamic: dynamic.into_boxed_slice(), dynamic_share: upto, hot }))
    }

    /// Set the expectation of every dynamic template: the exact body a node sends.
    pub fn expect_dynamic_bodies(&self, templates: &mut [RequestTemplate]) {
        for choice in &self.dynamic {
            for &t in &choice.templates {
                let template = &mut templates[t as usize];
                template.expect = Expectation::of_body(&dynamic_body(&template.target, choice.size as usize));
            }
        }
    }

    /// Whether draws depend on the time (a hot set that moves).
    pub fn is_clocked(&self) -> bool {
        self.hot.as_ref().is_some_and(|h| h.shift.is_some())
    }

    /// The hot-spot phase at `since_start` into the run (0 when the hot set never moves).
    pub fn phase(&self, since_start: Duration) -> u64 {
        match self.hot.as_ref().and_then(|h| h.shift) {
            Some(shift) => {
                u64::try_from(since_start.as_nanos() / shift.as_nanos().max(1)).unwrap_or(u64::MAX)
            }
            None => 0,
        }
    }

    /// One request in hot-spot phase `phase`: a dynamic target by share, else a hot document
    /// with the hot spot's share, else `docs[popular(rng)]`.
    pub fn draw(
        &self,
        rng: &mut SmallRng,
        hot_set: &mut HotSet,
        phase: u64,
        docs: &[u32],
        popular: impl FnOnce(&mut SmallRng) -> usize,
    ) -> u32 {
        if !self.dynamic.is_empty() {
            let u: f64 = rng.random();
            if u < self.dynamic_share {
                let last = self.dynamic.len() - 1;
                let choice = self.dynamic.iter().find(|c| u < c.upto).unwrap_or(&self.dynamic[last]);
                return choice.templates[rng.random_range(0..choice.templates.len())];
            }
        }
        if let Some(hot) = &self.hot
            && rng.random::<f64>() < hot.share
        {
            let set = hot_set.for_phase(hot, docs, phase);
            return set[rng.random_range(0..set.len())];
        }
        docs[popular(rng)]
    }
}

/// One feed's copy of the current phase's hot documents (templates), redrawn on a phase change.
#[derive(Clone, Debug, Default)]
pub struct HotSet {
    phase: Option<u64>,
    docs: Vec<u32>,
}

impl HotSet {
    fn for_phase(&mut self, hot: &HotSpotPlan, docs: &[u32], phase: u64) -> &[u32] {
        if self.phase != Some(phase) {
            self.docs.clear();
            self.docs.extend(
                hot_documents(hot.seed, phase, docs.len(), hot.documents).into_iter().map(|i| docs[i]),
            );
            self.phase = Some(phase);
        }
        &self.docs
    }
}

/// The positions of phase `phase`'s hot set: `k` distinct positions in `0..n`, uniformly,
/// from a generator seeded by (`seed`, `phase`) alone.
fn hot_documents(seed: u64, phase: u64, n: usize, k: usize) -> Vec<usize> {
    let mixed = (seed ^ HOT_SET_SALT).wrapping_add(phase.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut rng = SmallRng::seed_from_u64(mixed);
    rand::seq::index::sample(&mut rng, n, k.min(n)).into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(n: u32) -> Vec<u32> {
        (1000..1000 + n).collect()
    }

    fn hot(documents: usize, share: f64, shift_ms: Option<u64>) -> HotSpotPlan {
        HotSpotPlan { documents, share, shift: shift_ms.map(Duration::from_millis), seed: 7 }
    }

    fn mix_of(hot: Option<HotSpotPlan>, dynamic: Vec<(f64, u32)>) -> RequestMix {
        let mut upto = 0.0;
        let mut next = 0;
        let dynamic: Vec<DynamicChoice> = dynamic
            .into_iter()
            .map(|(share, variants)| {
                upto += share;
                let templates = (next..next + variants).collect();
                next += variants;
                DynamicChoice { upto, templates, size: 10 }
            })
            .collect();
        RequestMix { dynamic: dynamic.into_boxed_slice(), dynamic_share: upto, hot }
    }

    #[test]
    fn hot_share_of_10k_draws_is_within_0_03_of_the_setting() {
        let docs = docs(1000);
        for share in [0.2, 0.5, 0.9] {
            let mix = mix_of(Some(hot(5, share, None)), vec![]);
            let mut rng = SmallRng::seed_from_u64(11);
            let mut set = HotSet::default();
            let hot_docs: Vec<u32> = set.for_phase(mix.hot.as_ref().unwrap(), &docs, 0).to_vec();
            let n = 10_000;
            let hits = (0..n)
                .filter(|_| {
                    hot_docs.contains(&mix.draw(&mut rng, &mut set, 0, &docs, |r| r.random_range(0..1000)))
                })
                .count();
            // Popularity draws land in the hot set 5/1000 of the time too.
            let expected = share + (1.0 - share) * 0.005;
            let observed = hits as f64 / n as f64;
            assert!((observed - expected).abs() < 0.03, "share {share}: observed {observed}");
        }
    }

    #[test]
    fn hot_set_is_the_same_for_two_feeds_in_a_phase_and_changes_at_a_phase_boundary() {
        let docs = docs(10_000);
        let plan = hot(20, 1.0, Some(100));
        let (mut a, mut b) = (HotSet::default(), HotSet::default());
        let first = a.for_phase(&plan, &docs, 3).to_vec();
        assert_eq!(first, b.for_phase(&plan, &docs, 3));
        assert_eq!(first.len(), 20);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 20, "hot documents are distinct");
        let next = a.for_phase(&plan, &docs, 4).to_vec();
        assert_ne!(first, next, "a new phase draws a new hot set");
        assert_eq!(next, b.for_phase(&plan, &docs, 4));
        assert_eq!(first, a.for_phase(&plan, &docs, 3), "a phase's set depends on the phase only");
        // Draws of two feeds (different generators) in one phase land only in that set.
        let mix = mix_of(Some(plan), vec![]);
        for seed in [1, 2] {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut set = HotSet::default();
            assert!((0..1000).all(|_| first.contains(&mix.draw(
                &mut rng,
                &mut set,
                3,
                &docs,
                |_| unreachable!()
            ))));
        }
    }

    #[test]
    fn phase_counts_shifts_since_the_start_and_stays_0_without_a_shift() {
        let moving = mix_of(Some(hot(1, 0.5, Some(250))), vec![]);
        assert_eq!(moving.phase(Duration::ZERO), 0);
        assert_eq!(moving.phase(Duration::from_millis(249)), 0);
        assert_eq!(moving.phase(Duration::from_millis(250)), 1);
        assert_eq!(moving.phase(Duration::from_secs(10)), 40);
        assert!(moving.is_clocked());
        let still = mix_of(Some(hot(1, 0.5, None)), vec![]);
        assert_eq!(still.phase(Duration::from_secs(1000)), 0);
        assert!(!still.is_clocked());
    }

    #[test]
    fn dynamic_shares_of_10k_draws_are_within_0_03_and_ids_stay_below_variants() {
        // Templates 0..7 are the first target's variants, 7..10 the second's; docs above.
        let mix = mix_of(Some(hot(3, 0.5, None)), vec![(0.3, 7), (0.1, 3)]);
        let docs = docs(100);
        let mut rng = SmallRng::seed_from_u64(5);
        let mut set = HotSet::default();
        let n = 10_000;
        let mut counts = [0usize; 3];
        let mut seen = [false; 10];
        for _ in 0..n {
            let t = mix.draw(&mut rng, &mut set, 0, &docs, |r| r.random_range(0..100));
            match t {
                0..7 => counts[0] += 1,
                7..10 => counts[1] += 1,
                _ => counts[2] += 1,
            }
            if t < 10 {
                seen[t as usize] = true;
            }
        }
        let share = |c: usize| c as f64 / n as f64;
        assert!((share(counts[0]) - 0.3).abs() < 0.03, "{counts:?}");
        assert!((share(counts[1]) - 0.1).abs() < 0.03, "{counts:?}");
        assert!((share(counts[2]) - 0.6).abs() < 0.03, "{counts:?}");
        assert!(seen.iter().all(|s| *s), "every variant drawn: {seen:?}");
    }

    #[test]
    fn hot_spot_refusals_name_the_field() {
        let ok = HotSpot { documents: 3, share: 0.5, shift: None };
        assert!(check_hot_spot(&ok).is_ok());
        let err = |h: HotSpot| check_hot_spot(&h).unwrap_err().to_string();
        assert!(err(HotSpot { share: 0.0, ..ok.clone() }).contains("hot_spot.share"));
        assert!(err(HotSpot { share: 1.5, ..ok.clone() }).contains("hot_spot.share"));
        assert!(err(HotSpot { share: f64::NAN, ..ok.clone() }).contains("hot_spot.share"));
        assert!(err(HotSpot { documents: 0, ..ok.clone() }).contains("hot_spot.documents"));
        assert!(err(HotSpot { shift: Some(Duration::ZERO), ..ok }).contains("hot_spot.shift"));
    }

    #[test]
    fn dynamic_refusals_name_the_field() {
        let ok = DynamicTarget { path: "/cgi/a".into(), share: 0.4, variants: 10, size: 100 };
        assert!(check_dynamic(std::slice::from_ref(&ok), true).is_ok());
        let err = |t: Vec<DynamicTarget>| check_dynamic(&t, true).unwrap_err().to_string();
        assert!(err(vec![DynamicTarget { share: 0.0, ..ok.clone() }]).contains("share"));
        assert!(err(vec![ok.clone(), DynamicTarget { share: 0.7, ..ok.clone() }]).contains("dynamic shares"));
        assert!(err(vec![DynamicTarget { path: "cgi".into(), ..ok.clone() }]).contains("path"));
        assert!(err(vec![DynamicTarget { path: "/a?b".into(), ..ok.clone() }]).contains("path"));
        assert!(err(vec![DynamicTarget { path: "/a b".into(), ..ok.clone() }]).contains("path"));
        assert!(err(vec![DynamicTarget { variants: 0, ..ok.clone() }]).contains("variants"));
        assert!(err(vec![DynamicTarget { size: MAX_DYNAMIC_SIZE + 1, ..ok.clone() }]).contains("size"));
        let heavy = DynamicTarget { size: MAX_DYNAMIC_SIZE, variants: 1000, ..ok.clone() };
        assert!(err(vec![heavy.clone()]).contains("variants × size"));
        assert!(check_dynamic(&[heavy], false).is_ok(), "nothing is hashed without verification");
        let thirds = DynamicTarget { share: 0.1, ..ok };
        assert!(check_dynamic(&vec![thirds; 10], true).is_ok(), "ten shares of 0.1 sum to 1");
    }

    fn synthetic_config(documents: u64, verification: Verification) -> LoadConfig {
        let workload = crate::config::Workload::Synthetic {
            popularity: crate::config::Popularity::Uniform,
            documents: crate::config::DocumentSet::Model { documents },
        };
        LoadConfig {
            workload,
            verification,
            hot_spot: Some(HotSpot { documents: 4, share: 0.5, shift: None }),
            dynamic: vec![DynamicTarget { path: "/cgi/q".into(), share: 0.2, variants: 3, size: 700 }],
            ..LoadConfig::new(vec!["http://127.0.0.1:1/".parse().unwrap()])
        }
    }

    #[test]
    fn verified_plans_expect_each_dynamic_variant_to_be_its_exact_body() {
        use crate::workload::{JobPlan, WorkloadPlan};
        let pinned = Verification::Pinned(Expectation::Status(204));
        let plan = WorkloadPlan::build(&synthetic_config(50, pinned), 1).unwrap();
        let JobPlan::Sampled { mix: Some(_), .. } = &plan.jobs else { panic!("a sampled plan with a mix") };
        let dynamic: Vec<&RequestTemplate> = plan.templates.iter().filter(|t| t.dynamic).collect();
        let targets: Vec<&str> = dynamic.iter().map(|t| &*t.target).collect();
        assert_eq!(targets, ["/cgi/q?id=0", "/cgi/q?id=1", "/cgi/q?id=2"]);
        for t in &dynamic {
            assert_eq!(t.expect, Expectation::of_body(&dynamic_body(&t.target, 700)));
            assert_eq!(&*t.line, format!("GET {} HTTP/1.1\r\n", t.target).as_bytes());
        }
        assert!(plan.templates.iter().filter(|t| !t.dynamic).all(|t| t.expect == Expectation::Status(204)));
        let plan = WorkloadPlan::build(&synthetic_config(50, Verification::Off), 1).unwrap();
        assert!(plan.templates.iter().all(|t| t.expect == Expectation::Unchecked));
    }

    #[test]
    fn plans_refuse_a_hot_set_larger_than_the_document_set_and_sessions() {
        use crate::workload::WorkloadPlan;
        let err = WorkloadPlan::build(&synthetic_config(3, Verification::Off), 1).unwrap_err().to_string();
        assert!(err.contains("hot_spot.documents"), "{err}");
        assert!(WorkloadPlan::build(&synthetic_config(4, Verification::Off), 1).is_ok());
        let sessions = LoadConfig { sessions: true, ..synthetic_config(50, Verification::Off) };
        assert!(sessions.validate().unwrap_err().to_string().contains("sessions"));
        let single = LoadConfig {
            workload: crate::config::Workload::SingleUrl,
            ..synthetic_config(50, Verification::Off)
        };
        assert!(single.validate().unwrap_err().to_string().contains("synthetic"));
        assert!(WorkloadPlan::build(&single, 1).is_err());
    }
}
