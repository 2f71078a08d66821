//! Change-data-capture sources into bronze tables (ARCHITECTURE.md "CDC lakehouse"), one
//! submodule per source shape: [`debezium`] decodes Debezium change events from Kafka, [`files`]
//! reads AWS DMS and plain file deliveries from S3.

pub mod debezium;
pub mod files;
