//! What an aggregate's output was built by, and what it reads: the definition kept as a table
//! property (a run under another definition is refused), the output's column types checked
//! against what the source makes now, and the source columns read (column mapping refused).

use super::groups::Evaluator;
use crate::error::{Error, Result};
use crate::table::TableHandle;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use lakestream_formats::refine::aggregate::AggregateConfig;
use std::sync::Arc;

/// Output table property: the aggregate's groups, measures and filter when it was created.
pub(super) const SPEC_PROPERTY: &str = "lakestream.aggregate.spec";

/// The aggregate's definition as one line of text (what its stored state means).
pub(super) fn spec(a: &AggregateConfig) -> String {
    format!(
        "group_by={:?}; measures={:?}; filter={:?}",
        a.group_by, a.measures, a.filter
    )
}

/// Refuse an output built by another definition, or whose columns no longer have the types
/// this run would write (the source's types changed): its stored state would be misread.
pub(super) fn same_spec(
    output: &TableHandle,
    a: &AggregateConfig,
    ev: &Evaluator,
) -> std::result::Result<(), String> {
    let rebuild = "rebuild it (delete the output table and run the job again)";
    if let Some(stored) = output.property(SPEC_PROPERTY).ok().flatten()
        && stored != spec(a)
    {
        return Err(format!(
            "the output was built by another definition ({stored}); the job now says {}: {rebuild}",
            spec(a)
        ));
    }
    let have = output.arrow_schema().map_err(|e| e.to_string())?;
    for f in ev.output_schema().fields() {
        match have.field_with_name(f.name()) {
            Ok(h) if h.data_type() == f.data_type() => {}
            Ok(h) => {
                return Err(format!(
                    "output column `{}` is {} but the source now makes it {} (a source column \
                     changed type): {rebuild}",
                    f.name(),
                    h.data_type(),
                    f.data_type()
                ));
            }
            Err(_) if ev.optional_column(f.name()) => {}
            Err(_) => {
                return Err(format!(
                    "the output has no column `{}` (the job's definition changed): {rebuild}",
                    f.name()
                ));
            }
        }
    }
    Ok(())
}

/// The source's columns the job reads, in the source's latest schema (column mapping refused:
/// its Parquet columns have other names).
pub(super) fn source_columns(source: &TableHandle, a: &AggregateConfig) -> Result<SchemaRef> {
    if let Some(mode) = source.property("delta.columnMapping.mode")?
        && mode != "none"
    {
        return Err(Error::Config(format!(
            "aggregate source `{}` uses column mapping (`delta.columnMapping.mode` = {mode}), \
             which Lakestream does not read yet",
            a.source
        )));
    }
    let schema = source.arrow_schema()?;
    let mut fields = Vec::new();
    for c in a.source_columns() {
        let f = schema.field_with_name(&c).map_err(|_| {
            Error::Config(format!(
                "aggregate source `{}` has no column `{c}` (columns: {})",
                a.source,
                schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        fields.push(f.clone());
    }
    Ok(Arc::new(Schema::new(fields)))
}
