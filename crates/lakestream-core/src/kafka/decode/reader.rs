//! The arrow-json plumbing both decode paths share: the schema the decoder is given (timestamps
//! as text), building a decoder, feeding it whole values and cleaning its messages for a
//! dead letter's reason.

use crate::error::Result;
use arrow_json::ReaderBuilder;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// The schema handed to arrow-json: timestamp columns are read as text.
pub(super) fn decoder_schema(value_schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = value_schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(_, _) => Field::new(f.name(), DataType::Utf8, f.is_nullable()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// An arrow-json decoder for `value_schema` (timestamps as text), one batch of `rows`.
pub(super) fn decoder(
    value_schema: &Schema,
    strict: bool,
    rows: usize,
) -> Result<arrow_json::reader::Decoder> {
    Ok(ReaderBuilder::new(decoder_schema(value_schema))
        .with_batch_size(rows.max(1))
        .with_strict_mode(strict)
        .with_coerce_primitive(true)
        .build_decoder()?)
}

/// Feed `bytes` fully and flush one batch.
pub(super) fn decode_all(
    d: &mut arrow_json::reader::Decoder,
    inputs: &[&[u8]],
) -> std::result::Result<Option<RecordBatch>, String> {
    for bytes in inputs {
        let mut rest: &[u8] = bytes;
        while !rest.is_empty() {
            let n = d.decode(rest).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("decoder made no progress".into());
            }
            rest = &rest[n..];
        }
        // A separator so two objects never run together.
        d.decode(b"\n").map_err(|e| e.to_string())?;
    }
    d.flush().map_err(|e| e.to_string())
}

/// An arrow-json error message without its error-kind prefixes (a dead letter's reason).
pub(super) fn clean_arrow_message(e: &str) -> String {
    e.trim_start_matches("Json error: ")
        .trim_start_matches("Parser error: ")
        .to_string()
}
