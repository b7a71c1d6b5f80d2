//! Per-worker pools: idle keep-alive connections to each node (LIFO, bounded, dropped when
//! too old or when the node has gone down since they were pooled) and reusable relay buffers,
//! so a request allocates nothing and an idle client connection holds no buffer.

use std::time::{Duration, Instant};
use tokio::net::TcpStream;

struct PooledConn {
    stream: TcpStream,
    since: Instant,
    generation: u64,
}

/// Idle node connections of one worker thread.
pub struct NodePool {
    idle: Vec<Vec<PooledConn>>,
    max_per_node: usize,
    max_idle: Duration,
}

impl NodePool {
    pub fn new(nodes: usize, max_per_node: usize, max_idle: Duration) -> NodePool {
        NodePool { idle: (0..nodes).map(|_| Vec::new()).collect(), max_per_node, max_idle }
    }

    /// The most recently pooled live connection to `node`, if any. Connections from before
    /// the node's current `generation` (it went down since) or idle too long are dropped.
    pub fn take(&mut self, node: usize, generation: u64, now: Instant) -> Option<TcpStream> {
        let max_idle = self.max_idle;
        let list = self.list(node);
        while let Some(c) = list.pop() {
            if c.generation == generation && now.duration_since(c.since) < max_idle {
                return Some(c.stream);
            }
        }
        None
    }

    /// Keep `stream` for reuse, unless the pool for `node` is full.
    pub fn put(&mut self, node: usize, stream: TcpStream, generation: u64, now: Instant) {
        let max_per_node = self.max_per_node;
        let list = self.list(node);
        if list.len() < max_per_node {
            list.push(PooledConn { stream, since: now, generation });
        }
    }

    /// The idle list of `node`, made for a node a reload added.
    fn list(&mut self, node: usize) -> &mut Vec<PooledConn> {
        if node >= self.idle.len() {
            self.idle.resize_with(node + 1, Vec::new);
        }
        &mut self.idle[node]
    }

    /// Drop connections idle too long (oldest sit at the front of each list).
    pub fn sweep(&mut self, now: Instant) {
        for list in &mut self.idle {
            let keep_from =
                list.iter().position(|c| now.duration_since(c.since) < self.max_idle).unwrap_or(list.len());
            list.drain(..keep_from);
        }
    }

    /// Idle connections held, over all nodes.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.idle.iter().map(Vec::len).sum()
    }

    /// Whether no connection is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reusable byte buffers of one worker thread.
pub struct BufferPool {
    free: Vec<Vec<u8>>,
    size: usize,
    keep: usize,
}

impl BufferPool {
    pub fn new(size: usize, keep: usize) -> BufferPool {
        BufferPool { free: Vec::new(), size, keep }
    }

    /// An empty buffer with at least the pool's capacity.
    pub fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_else(|| Vec::with_capacity(self.size))
    }

    /// Return a buffer; oversized or surplus buffers are freed.
    pub fn give(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() >= self.size && buf.capacity() <= self.size * 4 && self.free.len() < self.keep {
            buf.clear();
            self.free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_pool_reuses_and_bounds_what_it_keeps() {
        let mut p = BufferPool::new(1024, 1);
        let a = p.take();
        assert!(a.capacity() >= 1024);
        let ptr = a.as_ptr();
        p.give(a);
        let b = p.take();
        assert_eq!(b.as_ptr(), ptr);
        p.give(b);
        p.give(Vec::with_capacity(1024));
        assert_eq!(p.free.len(), 1);
        p.give(Vec::new());
        assert_eq!(p.free.len(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn node_pool_drops_stale_generations_and_old_connections() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connect = || TcpStream::connect(addr);
        let mut pool = NodePool::new(2, 2, Duration::from_secs(10));
        let t0 = Instant::now();
        pool.put(0, connect().await.unwrap(), 1, t0);
        assert!(pool.take(0, 2, t0).is_none(), "older generation must not be reused");
        pool.put(0, connect().await.unwrap(), 2, t0);
        assert!(pool.take(0, 2, t0 + Duration::from_secs(11)).is_none(), "too old");
        pool.put(0, connect().await.unwrap(), 2, t0);
        pool.put(0, connect().await.unwrap(), 2, t0);
        pool.put(0, connect().await.unwrap(), 2, t0);
        assert_eq!(pool.len(), 2, "bounded per node");
        pool.sweep(t0 + Duration::from_secs(20));
        assert!(pool.is_empty());
        pool.put(1, connect().await.unwrap(), 0, t0);
        assert!(pool.take(1, 0, t0).is_some());
    }
}
