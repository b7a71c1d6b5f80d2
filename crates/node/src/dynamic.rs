//! Dynamic responses: a request matched by the class table first waits for its class's disk
//! read (`disk_ms`: one FIFO read on the storage model's disk holding the path, or on the
//! node-local class disk without a storage model), then costs its drawn CPU time — burnt on
//! the node's CPU pool, or served by its CPU model — then gets the class's deterministic body,
//! with `X-Locus-Class`, the disk time waited (`X-Locus-Disk-Us`, when the class has a disk
//! cost) and the CPU time spent, actual or modelled (`X-Locus-Cpu-Us`).

use std::io::Write;

use tokio::time::Instant;

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
    let disk = class.disk_time();
    let waited = if disk.is_zero() {
        None
    } else {
        let start = Instant::now();
        node.read_class_disk(req.path, disk).await;
        Some(start.elapsed())
    };
    let spent = match &node.cpu_model {
        Some(model) => model.run(cost).await.map(|_| cost).map_err(|_| ()),
        None => node.cpu.run(cost).await.map_err(|_| ()),
    };
    let spent = match spent {
        Ok(spent) => spent,
        Err(()) => {
            simple(out, &node.node_headers, 503, req.persistence, req.head_only(), b"");
            return Served::queued(503);
        }
    };
    start_head(out, 200, &node.node_headers);
    out.extend(b"Content-Type: text/plain\r\n");
    out.extend(class.header_line());
    if let Some(waited) = waited {
        let _ = write!(out.buf(), "X-Locus-Disk-Us: {}\r\n", waited.as_micros());
    }
    let _ = write!(out.buf(), "X-Locus-Cpu-Us: {}\r\n", spent.as_micros());
    content_length(out, class.size());
    end_head(out, req.persistence);
    if !req.head_only() {
        out.push_body(dynamic_body(req.target, class.size() as usize));
    }
    Served::queued(200)
}
