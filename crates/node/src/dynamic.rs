//! Dynamic responses: a request matched by the class table costs its drawn CPU time on the
//! node's CPU pool, then gets the class's deterministic body, with `X-Locus-Class` and the
//! CPU time actually spent (`X-Locus-Cpu-Us`).

use std::io::Write;

use crate::class_table::{DynamicClass, dynamic_body};
use crate::context::WorkerContext;
use crate::out_queue::OutQueue;
use crate::request_view::{RequestView, Served};
use crate::response::{content_length, end_head, simple, start_head};

/// Spend the class's CPU cost and queue its response.
pub async fn serve_dynamic(
    w: &WorkerContext,
    req: &RequestView<'_>,
    class: &DynamicClass,
    out: &mut OutQueue,
) -> Served {
    let node = &w.node;
    let cost = class.draw_cost();
    w.counters().dynamic();
    let spent = match node.cpu.run(cost).await {
        Ok(spent) => spent,
        Err(_) => {
            simple(out, &node.node_headers, 503, req.persistence, req.head_only(), b"");
            return Served::queued(503);
        }
    };
    start_head(out, 200, &node.node_headers);
    out.extend(b"Content-Type: text/plain\r\n");
    out.extend(class.header_line());
    let _ = write!(out.buf(), "X-Locus-Cpu-Us: {}\r\n", spent.as_micros());
    content_length(out, class.size());
    end_head(out, req.persistence);
    if !req.head_only() {
        out.push_body(dynamic_body(req.target, class.size() as usize));
    }
    Served::queued(200)
}
