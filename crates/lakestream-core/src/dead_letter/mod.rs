//! The dead-letter table: every record that cannot be ingested lands here with its raw bytes
//! (base64), where it came from and why, so nothing is ever dropped silently. Kafka records,
//! access-log objects and lines, unusable queue messages and refine's late rows all end here,
//! so this module alone owns the table: the letter and its origin ([`letter`]), the columns on
//! disk ([`table`]), the idempotent write ([`write`]) and the bounded reads back ([`scan`]).

pub mod letter;
pub mod scan;
pub mod table;
pub mod write;

pub use letter::{DeadLetter, Origin};
pub use write::{DeadLetterOutcome, write_dead_letters};
