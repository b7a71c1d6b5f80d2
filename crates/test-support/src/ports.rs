//! Loopback ports for tests that start servers on known ports: the rig's `free_port` (free
//! when handed out, never handed out twice in a process), panicking where a test cannot go on.

/// A loopback port free now and never returned before in this process.
pub fn free_port() -> u16 {
    locus_rig::free_port().expect("binding a loopback port")
}
