//! The servers a lab or benchmark starts on a `Net`'s hosts as child processes, with their
//! configuration and log in a scratch folder: Locus nodes and switches (`locus`), HAProxy
//! and NGINX (`third_party`), HAProxy and NGINX set up to be reloaded in place
//! (`reloadable`), each a `Server` once it accepts connections (`server`).

mod locus;
mod reloadable;
mod server;
mod third_party;
mod tls_files;

pub use locus::{
    ADMIN_PORT, AGENT_PORT, DcNodeSpec, HTTP_PORT, NodeSpec, SwitchSpec, is_one_way_mode, locus_node,
    locus_switch, write_handoff_key, write_peer_key,
};
pub use reloadable::{
    NginxFiles, WeightedNode, haproxy_master_worker, haproxy_reloadable_config, haproxy_replacing,
    nginx_reloadable, nginx_reloadable_config,
};
pub use server::{Server, start as start_server};
pub use third_party::{
    HaproxyBalance, HaproxyTuning, Listen, NginxBalance, check_haproxy_config, check_nginx_config, haproxy,
    haproxy_config, nginx_proxy, nginx_proxy_config, nginx_static,
};
pub use tls_files::{CertKind, TlsFiles, write_tls_files};
