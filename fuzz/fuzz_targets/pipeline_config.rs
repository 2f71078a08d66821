//! `cargo fuzz run pipeline_config`: see `lakestream_formats::fuzzing::pipeline_config` for what is checked.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lakestream_formats::fuzzing::pipeline_config(data));
