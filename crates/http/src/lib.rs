//! Strict HTTP/1.x framing for the switch and node: request and response heads, bodies, limits.
