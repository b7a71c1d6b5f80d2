//! The Locus front-end switch: accept, parse, pick a node by policy, relay.
