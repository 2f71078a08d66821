//! Change-data-capture sources into bronze tables (ARCHITECTURE.md "CDC lakehouse"): one
//! submodule per source shape.

pub mod files;
