//! CSLD's sniffer: the `Task` each forwarded packet of interest becomes (connection setup
//! or teardown, a static, IMS, invalid or dynamic request) with its a-priori CPU and disk
//! cost from the class table, the file table and the cost table.

use super::CsldParams;
use crate::PolicyInputs;
use locus_core::RequestInfo;
use std::time::Duration;

/// What a task is, as the sniffer tells from the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// Connection setup or teardown.
    Conn,
    /// A full GET of a document: its disk cost depends on a predicted miss.
    Static,
    /// A conditional GET answered "not modified".
    Ims,
    /// A request for a document the site does not have.
    Inv,
    /// A request matching a class of the class table.
    Dyn,
}

/// One unit of estimated work queued for a node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Task {
    /// When it was sniffed, ns.
    pub(crate) ts: u64,
    /// The connection's round-trip time, ns (spaces the slow-start parts of a response).
    pub(crate) rtt: u64,
    pub(crate) kind: TaskKind,
    /// CPU before transmitting, ns.
    pub(crate) ccost: u64,
    /// Disk, ns (for `Static` decided by the miss prediction instead).
    pub(crate) dcost: u64,
    /// Response body to transmit, bytes.
    pub(crate) size: u64,
    /// `target_hash` of the document (`Static` only).
    pub(crate) file: u64,
}

/// `d` in ns, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Task {
    /// A connection setup or teardown at `ts`.
    pub(crate) fn conn(ts: u64, params: &CsldParams) -> Task {
        Task { ts, rtt: 0, kind: TaskKind::Conn, ccost: params.conn_ns, dcost: 0, size: 0, file: 0 }
    }

    /// The task of a forwarded request: a class-table hit is dynamic; with a file table, a
    /// target it lacks is invalid; a conditional request whose date is not older than the
    /// document (or, without a file table, any conditional request) is IMS; anything else
    /// is a static document sized by the file table, else the request's hint, else
    /// `default_size`.
    pub(crate) fn request(
        req: &RequestInfo<'_>,
        rtt: Duration,
        ts: u64,
        params: &CsldParams,
        inputs: &PolicyInputs,
    ) -> Task {
        let mut task = Task {
            ts,
            rtt: nanos(rtt),
            kind: TaskKind::Static,
            ccost: params.basic_ns,
            dcost: 0,
            size: 0,
            file: req.target_hash,
        };
        if let Some(class) = req.class.and_then(|c| inputs.classes.get(c as usize)) {
            task.kind = TaskKind::Dyn;
            task.ccost = class.cpu_ns;
            task.dcost = class.disk_ns;
            task.size = class.size;
            return task;
        }
        let file = inputs.files.as_ref().map(|files| files.get(req.target_hash));
        let reply = params.basic_ns.saturating_add(params.reply_ns);
        match (file, req.if_modified_since) {
            (Some(None), _) => {
                task.kind = TaskKind::Inv;
                task.ccost = reply;
            }
            (Some(Some(info)), Some(ims)) if ims >= info.mtime => {
                task.kind = TaskKind::Ims;
                task.ccost = reply;
            }
            (None, Some(_)) => {
                task.kind = TaskKind::Ims;
                task.ccost = reply;
            }
            (Some(Some(info)), _) => task.size = info.size,
            (None, None) => task.size = req.size_hint.unwrap_or(params.default_size),
        }
        task
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileInfo, FileTable};
    use locus_core::{ClassCost, ResourceKind, target_hash};
    use std::sync::Arc;

    fn inputs(with_files: bool) -> PolicyInputs {
        let classes: Arc<[ClassCost]> =
            vec![ClassCost { cpu_ns: 30_000_000, disk_ns: 5, size: 700, resource: ResourceKind::Cpu }].into();
        let files = with_files.then(|| {
            Arc::new(FileTable::from_iter([(target_hash("/a"), FileInfo { size: 9_000, mtime: 100 })]))
        });
        PolicyInputs { classes, files }
    }

    #[test]
    fn sniffer_tells_dynamic_invalid_ims_and_static_requests_apart() {
        let p = CsldParams::default();
        let rtt = Duration::from_millis(150);
        let with = inputs(true);
        let mut dynamic = RequestInfo::get("/cgi");
        dynamic.class = Some(0);
        let t = Task::request(&dynamic, rtt, 7, &p, &with);
        assert_eq!(
            (t.kind, t.ccost, t.dcost, t.size, t.rtt),
            (TaskKind::Dyn, 30_000_000, 5, 700, 150_000_000)
        );
        assert_eq!(Task::request(&RequestInfo::get("/missing"), rtt, 7, &p, &with).kind, TaskKind::Inv);
        let mut ims = RequestInfo::get("/a");
        ims.if_modified_since = Some(100);
        let t = Task::request(&ims, rtt, 7, &p, &with);
        assert_eq!((t.kind, t.ccost, t.size), (TaskKind::Ims, 243_000, 0));
        ims.if_modified_since = Some(99);
        let t = Task::request(&ims, rtt, 7, &p, &with);
        assert_eq!((t.kind, t.ccost, t.size), (TaskKind::Static, 213_000, 9_000), "modified since");
        // Without a file table: unknown class and no date ⇒ static of the hinted size.
        let without = inputs(false);
        let mut hinted = RequestInfo::get("/missing");
        hinted.size_hint = Some(123);
        hinted.class = Some(5);
        assert_eq!(Task::request(&hinted, rtt, 7, &p, &without).size, 123);
        assert_eq!(Task::request(&RequestInfo::get("/x"), rtt, 7, &p, &without).size, p.default_size);
        hinted.if_modified_since = Some(0);
        assert_eq!(Task::request(&hinted, rtt, 7, &p, &without).kind, TaskKind::Ims);
        assert_eq!(Task::conn(3, &p).ccost, p.conn_ns);
    }
}
