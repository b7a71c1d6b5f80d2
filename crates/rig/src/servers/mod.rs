//! The servers a lab or benchmark starts on a `Net`'s hosts as child processes, with their
//! configuration and log in a scratch folder: Locus nodes and switches (`locus`), HAProxy
//! (`haproxy`) and NGINX (`nginx`), each a `Server` once it accepts connections (`server`).

mod haproxy;
mod locus;
mod nginx;
mod server;

pub use haproxy::{HaproxyBalance, haproxy, haproxy_config};
pub use locus::{
    ADMIN_PORT, AGENT_PORT, DcNodeSpec, HTTP_PORT, NodeSpec, SwitchSpec, is_one_way_mode, locus_node,
    locus_switch, write_handoff_key,
};
pub use nginx::{NginxBalance, nginx_proxy, nginx_proxy_config, nginx_static};
pub use server::Server;
