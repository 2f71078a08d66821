//! The Kafka (MSK) ingestor: batches of Kafka records into their topics' tables, exactly once
//! per record through per-partition `txn` watermarks ([`ingestor`]); [`redrive`] puts back a
//! batch Lambda gave up on, [`decode`] turns record values into Arrow, [`bronze`] routes and
//! decodes the topics of Debezium CDC families into their bronze tables, [`planner`] plans one
//! table's append, [`dead_letters`] sends what cannot be ingested to the dead-letter table and
//! [`report`] says what happened to every record.
//!
//! Modules import downward only: `redrive` and `dead_letters` -> `ingestor` -> `planner` ->
//! `bronze` -> `decode`, all -> `report` (`bronze` also extends the ingestor with routing).

mod bronze;
mod dead_letters;
pub mod decode;
mod ingestor;
mod planner;
mod redrive;
mod report;

pub use ingestor::KafkaIngestor;
pub use redrive::{Redrive, RedriveReport};
pub use report::{IngestReport, RecordOutcome, TableReport};
