//! `Backlog`: a node's listen queue — established connections no process has accepted
//! yet, oldest first. A SYN that finds `capacity` connections queued is dropped (Linux 2.4
//! caps Apache's 511 at SOMAXCONN = 128); a handshake that completes always joins.

use std::collections::VecDeque;

/// A bounded FIFO of connection ids.
#[derive(Clone, Debug)]
pub struct Backlog {
    queue: VecDeque<u32>,
    capacity: usize,
}

impl Backlog {
    /// An empty backlog holding at most `capacity` connections.
    pub fn new(capacity: u32) -> Backlog {
        Backlog { queue: VecDeque::new(), capacity: capacity as usize }
    }

    /// Whether a SYN arriving now is dropped.
    pub fn is_full(&self) -> bool {
        self.queue.len() >= self.capacity
    }

    /// Queue an established connection.
    pub fn push(&mut self, conn: u32) {
        self.queue.push_back(conn);
    }

    /// The oldest waiting connection, for a process that is free.
    pub fn take(&mut self) -> Option<u32> {
        self.queue.pop_front()
    }

    /// Connections waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backlog_is_fifo_and_full_at_its_capacity() {
        let mut b = Backlog::new(2);
        b.push(1);
        assert!(!b.is_full());
        b.push(2);
        assert!(b.is_full());
        assert_eq!(b.take(), Some(1));
        assert!(!b.is_full());
        b.push(3);
        assert_eq!((b.take(), b.take(), b.take()), (Some(2), Some(3), None));
    }
}
