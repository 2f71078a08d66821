//! `cargo fuzz run access_log_line`: see `lakestream_formats::fuzzing::access_log_line` for what is checked.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lakestream_formats::fuzzing::access_log_line(data));
