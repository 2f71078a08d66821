//! `cargo fuzz run notification`: see `lakestream_formats::fuzzing::notification` for what is checked.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lakestream_formats::fuzzing::notification(data));
