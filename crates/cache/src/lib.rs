//! Byte-bounded document cache with LRU, LFU, GDS and GDSF replacement. No I/O.
