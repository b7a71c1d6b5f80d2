//! Placeholder, to be written.
