//! Integration tests of the core against real storage: a filesystem lake always, and an
//! S3-compatible server on 127.0.0.1 when `LAKESTREAM_TEST_S3_ENDPOINT` is set (the README's
//! test command and `.ci/run` start moto and set it; `LAKESTREAM_REQUIRE_S3=1` makes its
//! absence a failure rather than a skip).

mod access_log_etag;
mod access_log_limits;
mod access_logs;
mod access_report;
mod aggregate;
mod ambiguous;
mod another_engine;
mod athena_manifest;
mod cdc_apply;
mod cdc_debezium;
mod cdc_files;
mod cdc_recovery;
mod cdc_redrive;
mod change_data_feed;
mod checked_commit;
mod commit_loop;
mod compacted_deletes;
mod compaction_races;
mod dead_letter_growth;
mod deletion_vectors;
mod event_time;
mod faults;
mod ingest;
mod insert_only_feed;
mod inspect;
mod load;
mod maintenance;
mod memory_bounds;
mod partition_values;
mod position_resets;
mod redrive;
mod refine;
mod refine_readers;
mod requests;
mod scd2;
mod scd2_races;
mod schema_case;
mod table_paths;
mod table_reset;
mod table_seams;
mod tombstone_expiry;
mod tombstones_inline;
mod upsert;
mod vacuum_guards;
