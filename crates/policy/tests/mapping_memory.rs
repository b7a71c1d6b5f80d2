//! Heap cost of the LARD and LARD/R target mappings: a counting global allocator measures
//! the live bytes added by 100,000 distinct targets and the test bounds the bytes per entry.

use locus_policy::{Cluster, PolicyConfig, RequestInfo, Time, build};
use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

/// The system allocator, counting the bytes currently allocated.
struct CountingAllocator;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The tests measure a process-wide counter, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const TARGETS: usize = 100_000;
const MAX_BYTES_PER_ENTRY: f64 = 200.0;

/// Live heap bytes per mapping entry after `TARGETS` distinct targets went through a
/// cluster of 8 nodes running `name` (each request assigned and completed).
fn bytes_per_entry(name: &str) -> f64 {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let weights = [1u32; 8];
    let config = PolicyConfig::from_name(name).unwrap();
    let mut cluster = Cluster::new(build(&config, &weights).unwrap(), &weights, Duration::ZERO);
    let mut target = String::with_capacity(64);
    let before = LIVE_BYTES.load(Ordering::SeqCst);
    for i in 0..TARGETS {
        target.clear();
        write!(target, "/site/dir{}/file{i}.html", i % 97).unwrap();
        let req = RequestInfo::get(&target);
        let now = Time::from_millis(i as u64);
        let node = cluster.assign(&req, now).unwrap();
        cluster.complete(node, req.target_hash, now);
    }
    let after = LIVE_BYTES.load(Ordering::SeqCst);
    let entries = cluster.policy().mapping_len();
    assert_eq!(entries, TARGETS, "{name} should remember every target");
    let per_entry = (after - before) as f64 / entries as f64;
    drop(cluster);
    per_entry
}

#[test]
fn lard_r_mapping_costs_at_most_200_bytes_per_entry() {
    let b = bytes_per_entry("lard-r");
    eprintln!("lard-r mapping: {b:.1} bytes per entry");
    assert!(b > 0.0, "the counting allocator saw no growth");
    assert!(b <= MAX_BYTES_PER_ENTRY, "lard-r mapping: {b:.1} bytes per entry");
}

#[test]
fn lard_mapping_costs_at_most_200_bytes_per_entry() {
    let b = bytes_per_entry("lard");
    eprintln!("lard mapping: {b:.1} bytes per entry");
    assert!(b > 0.0, "the counting allocator saw no growth");
    assert!(b <= MAX_BYTES_PER_ENTRY, "lard mapping: {b:.1} bytes per entry");
}
