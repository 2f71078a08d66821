//! Change data capture into bronze tables (ARCHITECTURE.md "CDC lakehouse"): [`debezium`]
//! decodes Debezium change events from Kafka.

pub mod debezium;
