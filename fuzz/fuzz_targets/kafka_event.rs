//! `cargo fuzz run kafka_event`: see `lakestream_formats::fuzzing::kafka_event` for what is checked.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lakestream_formats::fuzzing::kafka_event(data));
