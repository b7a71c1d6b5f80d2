//! DC-Apache for Locus, pure: every server is the home of its own documents and a co-operator
//! for replicas of others'. This crate holds the decisions — the document graph with its link
//! positions, the rewriting plan, replica URLs, the load table, replica selection, the replica
//! map, the quota methods and the consistency rules — with no I/O, no clock and no global RNG,
//! so the node and the simulator run the same code.

// The document side: parse once, rewrite by splicing positions.
pub mod doc_graph;
pub mod html_links;
pub mod replica_url;
pub mod rewrite;
pub mod scheme;
pub mod site_names;
pub mod site_path;

// The cluster side: who is loaded, where copies are, what to place or drop.
pub mod balancer;
pub mod consistency;
pub mod load_table;
pub mod quota_books;
pub mod replica_map;
pub mod replica_store;
pub mod request_rates;
mod resource_aware;
pub mod selector;

pub mod membership;

pub use membership::{Membership, MembershipError, Server, ServerId};
pub use scheme::Scheme;
