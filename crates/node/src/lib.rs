//! The Locus back-end web server: document root, cache, storage model, dynamic classes, admin.
