//! Benchmarks of the whole system: Locus beside HAProxy and NGINX, driven by wrk.
