//! Fuzz the DC page plan (`RewritePlan::for_copy`, `render`, `render_to_vec`): any bytes are
//! planned or refused, never a panic; a plan's slots lie in order inside the page; rendering
//! every slot verbatim gives the page back; any rendering is exactly `content_length` long;
//! and a page rewritten to the home's own URLs plans again to the same slot targets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locus_dc::replica_url::{original_url, replica_url};
use locus_dc::rewrite::{BasePlan, Piece, RewritePlan, SlotChoice};

const HOME: &str = "h1:8080";
const PAGE: &str = "/d/page.html";

fuzz_target!(|input: &[u8]| {
    let Some((&picks, page)) = input.split_first() else { return };
    let Ok(plan) = RewritePlan::for_copy(page, PAGE, HOME) else { return };
    assert_eq!(plan.page_len(), page.len());
    let mut end = 0;
    for slot in plan.slots() {
        assert!(end <= slot.range.start && slot.range.start <= slot.range.end, "{:?}", slot.range);
        assert!(slot.range.end <= page.len() && slot.target_path.starts_with('/'));
        end = slot.range.end;
    }
    if let BasePlan::Absent { insert_at } = plan.base() {
        assert!(*insert_at <= page.len());
    }

    let verbatim = vec![SlotChoice::Verbatim; plan.slots().len()];
    assert_eq!(plan.render_to_vec(page, &verbatim, None).unwrap(), page);

    let choices: Vec<SlotChoice> = plan
        .slots()
        .iter()
        .enumerate()
        .map(|(i, s)| match (picks >> (i % 4 * 2)) & 3 {
            0 => SlotChoice::Verbatim,
            1 | 2 => SlotChoice::Url(format!("{}{}", original_url(HOME, &s.target_path), s.suffix)),
            _ => SlotChoice::Url(format!("{}{}", replica_url("c2:8080", 7, "s1", &s.target_path), s.suffix)),
        })
        .collect();
    let base = if picks & 0x80 != 0 { plan.base_for_copy(HOME) } else { None };
    let rendering = plan.render(&choices, base.as_deref()).unwrap();
    let out = plan.render_to_vec(page, &choices, base.as_deref()).unwrap();
    assert_eq!(out.len() as u64, rendering.content_length);
    for piece in &rendering.pieces {
        if let Piece::Original(r) = piece {
            assert!(r.start < r.end && r.end <= page.len(), "{r:?}");
        }
    }

    // Every slot pointed at the home's own URL: the page plans to the same targets.
    let home_urls: Vec<SlotChoice> = plan
        .slots()
        .iter()
        .map(|s| SlotChoice::Url(format!("{}{}", original_url(HOME, &s.target_path), s.suffix)))
        .collect();
    let rewritten = plan.render_to_vec(page, &home_urls, None).unwrap();
    let replanned = RewritePlan::for_copy(&rewritten, PAGE, HOME).expect("a rewritten page plans");
    let targets = |p: &RewritePlan| -> Vec<(String, String)> {
        p.slots().iter().map(|s| (s.target_path.clone(), s.suffix.clone())).collect()
    };
    assert_eq!(targets(&replanned), targets(&plan), "rewritten {:?}", String::from_utf8_lossy(&rewritten));
});
