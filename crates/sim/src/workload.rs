//! `Workload`: a trace interned for simulation. Every distinct target gets a dense `u32` id
//! with its size, class, `target_hash` and disk (striped by request frequency) computed once;
//! the request stream is a `Vec<u32>` of ids, so the event loop touches no strings; each
//! request also keeps its kind (full, If-Modified-Since, invalid, dynamic) from its status.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use locus_core::{Method, RequestInfo, ResourceKind, target_hash};
use locus_policy::{FileInfo, FileTable, PolicyInputs};
use locus_trace::{
    ReadOptions, StatsAccumulator, TraceReader, TraceRecord, TraceStats, ZipfTraceGenerator, ZipfTraceSpec,
};

use crate::cost_model::CostModel;
use crate::error::SimError;

/// Modification time every document is given (seconds since the epoch) plus its id; an
/// If-Modified-Since request carries its document's time + 1.
pub const MTIME_BASE: u64 = 1_000_000_000;

/// Response size of a dynamic class when the trace logs none, bytes.
pub const DEFAULT_DYNAMIC_SIZE: u64 = 4096;

/// What a request asks of a node, from its trace status and class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum RequestKind {
    /// A full response from a file (status 200 and anything else not below).
    #[default]
    Static,
    /// A conditional request answered 304 Not Modified.
    Ims,
    /// A request for a file the site lacks (404).
    Inv,
    /// A dynamic request (it has a cost class).
    Dynamic,
}

impl RequestKind {
    /// The kind of `r`: a class makes it dynamic, else status 304 ⇒ IMS, 404 ⇒ INV.
    pub fn of(r: &TraceRecord) -> RequestKind {
        match (r.class, r.status) {
            (Some(_), _) => RequestKind::Dynamic,
            (None, 304) => RequestKind::Ims,
            (None, 404) => RequestKind::Inv,
            _ => RequestKind::Static,
        }
    }
}

/// What the simulator knows about one distinct target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TargetMeta {
    /// `locus_core::target_hash` of the target string (what policies map by).
    pub hash: u64,
    /// Size in bytes (the largest size the trace logged for it).
    pub size: u64,
    /// Dynamic cost class, if the target is dynamic.
    pub class: Option<u16>,
    /// Method of the first request for it.
    pub method: Method,
    /// Rank by request count (0 = most requested; ties by first appearance): files are
    /// striped over a node's disks round-robin in this order, as in the LARD paper.
    pub popularity_rank: u32,
    /// The trace answered a request for it 404 (the site lacks it).
    pub missing: bool,
}

/// A trace ready for the simulator.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    names: String,
    /// End offset in `names` of each target's string.
    name_ends: Vec<u32>,
    targets: Vec<TargetMeta>,
    requests: Vec<u32>,
    /// Kind of each request.
    kinds: Vec<RequestKind>,
    /// Arrival time of each request in ns from the first, when the trace has times.
    times: Option<Vec<u64>>,
}

/// Builds a `Workload` one record at a time.
#[derive(Debug, Default)]
pub struct WorkloadBuilder {
    ids: HashMap<String, u32>,
    workload: Workload,
    counts: Vec<u64>,
    raw_times: Vec<f64>,
    all_timed: bool,
}

impl WorkloadBuilder {
    pub fn new() -> WorkloadBuilder {
        WorkloadBuilder { all_timed: true, ..WorkloadBuilder::default() }
    }

    /// Add one request.
    pub fn add(&mut self, r: &TraceRecord) {
        let w = &mut self.workload;
        let id = match self.ids.get(r.target.as_str()) {
            Some(&id) => id,
            None => {
                let id = w.targets.len() as u32;
                w.names.push_str(&r.target);
                w.name_ends.push(u32::try_from(w.names.len()).expect("target names fit in 4 GiB"));
                w.targets.push(TargetMeta {
                    hash: target_hash(&r.target),
                    size: r.size,
                    class: r.class,
                    method: r.method,
                    popularity_rank: 0,
                    missing: false,
                });
                self.counts.push(0);
                self.ids.insert(r.target.clone(), id);
                id
            }
        };
        let t = &mut w.targets[id as usize];
        t.size = t.size.max(r.size);
        if t.class.is_none() {
            t.class = r.class;
        }
        let kind = RequestKind::of(r);
        t.missing |= kind == RequestKind::Inv;
        self.counts[id as usize] += 1;
        w.requests.push(id);
        w.kinds.push(kind);
        match r.time {
            Some(time) if self.all_timed => self.raw_times.push(time),
            _ => self.all_timed = false,
        }
    }

    /// Requests added so far.
    pub fn len(&self) -> usize {
        self.workload.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workload.requests.is_empty()
    }

    /// The workload (popularity ranks computed; times kept only if every record had one).
    pub fn finish(mut self) -> Workload {
        let mut order: Vec<u32> = (0..self.workload.targets.len() as u32).collect();
        order.sort_by(|&a, &b| self.counts[b as usize].cmp(&self.counts[a as usize]).then(a.cmp(&b)));
        for (rank, id) in order.into_iter().enumerate() {
            self.workload.targets[id as usize].popularity_rank = rank as u32;
        }
        if self.all_timed && !self.raw_times.is_empty() {
            let t0 = self.raw_times.iter().copied().fold(f64::INFINITY, f64::min);
            self.workload.times =
                Some(self.raw_times.iter().map(|t| ((t - t0) * 1e9).round().max(0.0) as u64).collect());
        }
        self.workload
    }
}

impl Workload {
    /// Intern `records`.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a TraceRecord>) -> Workload {
        let mut b = WorkloadBuilder::new();
        for r in records {
            b.add(r);
        }
        b.finish()
    }

    /// Read and intern the trace at `path` (any format the trace crate reads).
    pub fn from_trace_file(path: &Path, options: &ReadOptions) -> Result<Workload, SimError> {
        let mut b = WorkloadBuilder::new();
        for r in TraceReader::open(path, options)? {
            b.add(&r?);
        }
        if b.is_empty() {
            return Err(SimError::EmptyTrace);
        }
        Ok(b.finish())
    }

    /// Generate and intern a synthetic trace, with its statistics (coverage at `shares`).
    pub fn synthetic_with_stats(
        spec: ZipfTraceSpec,
        shares: &[f64],
    ) -> Result<(Workload, TraceStats), SimError> {
        let mut b = WorkloadBuilder::new();
        let mut stats = StatsAccumulator::new();
        for r in ZipfTraceGenerator::new(spec)? {
            b.add(&r);
            stats.add(r);
        }
        if b.is_empty() {
            return Err(SimError::EmptyTrace);
        }
        Ok((b.finish(), stats.finish(shares)))
    }

    /// Generate and intern a synthetic trace.
    pub fn synthetic(spec: ZipfTraceSpec) -> Result<Workload, SimError> {
        let mut b = WorkloadBuilder::new();
        for r in ZipfTraceGenerator::new(spec)? {
            b.add(&r);
        }
        if b.is_empty() {
            return Err(SimError::EmptyTrace);
        }
        Ok(b.finish())
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The distinct targets, by id.
    pub fn targets(&self) -> &[TargetMeta] {
        &self.targets
    }

    /// The request stream as target ids.
    pub fn requests(&self) -> &[u32] {
        &self.requests
    }

    /// The kind of each request, in stream order.
    pub fn kinds(&self) -> &[RequestKind] {
        &self.kinds
    }

    /// Modification time of target `id` (seconds since the epoch).
    pub fn mtime(&self, id: u32) -> u64 {
        MTIME_BASE + id as u64
    }

    /// Request number `index` of the stream as a policy sees it: `request_info` of its
    /// target, with `if_modified_since` set (mtime + 1) if it is an IMS request.
    #[inline]
    pub fn request_info_at(&self, index: usize) -> RequestInfo<'_> {
        let id = self.requests[index];
        let mut info = self.request_info(id);
        if self.kinds[index] == RequestKind::Ims {
            info.if_modified_since = Some(self.mtime(id) + 1);
        }
        info
    }

    /// What a content-aware policy knows a priori of this site: the class table (class k's
    /// mean CPU and disk time from `costs`, size as logged or 4 KiB, resource by which of
    /// them it uses) for every class up to the largest in the trace, and the file table
    /// (every static target the site has: not dynamic, not answered 404).
    pub fn policy_inputs(&self, costs: &CostModel) -> PolicyInputs {
        let max_class = self.targets.iter().filter_map(|t| t.class).max().unwrap_or(0);
        let classes: Vec<locus_core::ClassCost> = (0..=max_class)
            .map(|k| {
                let size = self
                    .targets
                    .iter()
                    .filter(|t| t.class == Some(k) && t.size > 0)
                    .map(|t| t.size)
                    .max()
                    .unwrap_or(DEFAULT_DYNAMIC_SIZE);
                let (cpu_ns, disk_ns) = (costs.class_mean_ns(k), costs.class_disk_ns(k));
                let resource = ResourceKind::of_costs(cpu_ns > 0, disk_ns > 0);
                locus_core::ClassCost { cpu_ns, disk_ns, size, resource }
            })
            .collect();
        let files: FileTable = (0..self.targets.len() as u32)
            .filter(|&id| {
                let t = &self.targets[id as usize];
                t.class.is_none() && !t.missing
            })
            .map(|id| {
                let t = &self.targets[id as usize];
                (t.hash, FileInfo { size: t.size, mtime: self.mtime(id) })
            })
            .collect();
        PolicyInputs { classes: classes.into(), files: Some(Arc::new(files)) }
    }

    /// Arrival times in ns from the first request, if the trace had times for every record.
    pub fn times(&self) -> Option<&[u64]> {
        self.times.as_deref()
    }

    /// The target string of `id`.
    pub fn target_name(&self, id: u32) -> &str {
        let end = self.name_ends[id as usize] as usize;
        let start = if id == 0 { 0 } else { self.name_ends[id as usize - 1] as usize };
        &self.names[start..end]
    }

    /// The request for target `id` as a policy sees it (the switch builds the same from the
    /// request line: method, target, hash; the size hint and class come from the trace).
    #[inline]
    pub fn request_info(&self, id: u32) -> RequestInfo<'_> {
        let t = &self.targets[id as usize];
        RequestInfo {
            method: t.method,
            target: self.target_name(id),
            target_hash: t.hash,
            size_hint: (t.size > 0).then_some(t.size),
            class: t.class,
            if_modified_since: None,
        }
    }

    /// Give every target without a class the class `class_of(target)` says, with its response
    /// size where the trace logged none, and make its requests dynamic; returns how many
    /// distinct targets became dynamic. (A 404'd target stays invalid.)
    pub fn classify(&mut self, class_of: impl Fn(&str) -> Option<(u16, u64)>) -> usize {
        let newly: Vec<bool> = (0..self.targets.len())
            .map(|id| {
                let t = self.targets[id];
                if t.class.is_some() || t.missing {
                    return false;
                }
                let Some((class, size)) = class_of(self.target_name(id as u32)) else { return false };
                let t = &mut self.targets[id];
                t.class = Some(class);
                if t.size == 0 {
                    t.size = size;
                }
                true
            })
            .collect();
        for (kind, &id) in self.kinds.iter_mut().zip(&self.requests) {
            if newly[id as usize] {
                *kind = RequestKind::Dynamic;
            }
        }
        newly.iter().filter(|&&n| n).count()
    }

    /// Sum of the sizes of the distinct targets.
    pub fn unique_bytes(&self) -> u64 {
        self.targets.iter().map(|t| t.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_interns_targets_with_size_hash_and_popularity_rank() {
        let recs = vec![
            TraceRecord::get("/a", 10),
            TraceRecord::get("/b", 20),
            TraceRecord::get("/b", 25),
            TraceRecord::get("/c", 5),
            TraceRecord::get("/b", 20),
            TraceRecord::get("/c", 5),
        ];
        let w = Workload::from_records(&recs);
        assert_eq!(w.requests(), [0, 1, 1, 2, 1, 2]);
        assert_eq!(w.target_name(1), "/b");
        assert_eq!(w.targets()[1].size, 25);
        assert_eq!(w.targets()[1].hash, target_hash("/b"));
        let ranks: Vec<u32> = w.targets().iter().map(|t| t.popularity_rank).collect();
        assert_eq!(ranks, [2, 0, 1]);
        assert_eq!(w.request_info(2).target, "/c");
        assert!(w.times().is_none());
        assert_eq!(w.unique_bytes(), 40);
    }
}
