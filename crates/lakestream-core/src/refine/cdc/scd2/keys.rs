//! The key codec of an SCD2 run: key columns encoded to comparable bytes in the silver key
//! types (arrow's row format), and decoded back.

use crate::error::{Error, Result};
use deltalake::arrow::array::{ArrayRef, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, SchemaRef};
use deltalake::arrow::row::{RowConverter, SortField};

/// Encodes key columns to comparable bytes, in the silver key types.
pub struct KeyCodec {
    converter: RowConverter,
    keys: Vec<String>,
    types: Vec<DataType>,
}

impl KeyCodec {
    /// A codec for `keys` typed as in `schema`.
    pub fn new(schema: &SchemaRef, keys: &[String]) -> Result<Self> {
        let types = keys
            .iter()
            .map(|k| {
                schema
                    .field_with_name(k)
                    .map(|f| f.data_type().clone())
                    .map_err(|_| Error::Internal(format!("no key column `{k}` in silver")))
            })
            .collect::<Result<Vec<_>>>()?;
        let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())?;
        Ok(Self {
            converter,
            keys: keys.to_vec(),
            types,
        })
    }

    /// The encoded key of every row of `batch`.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
        let cols = self
            .keys
            .iter()
            .zip(&self.types)
            .map(|(k, t)| {
                let c = batch
                    .column_by_name(k)
                    .ok_or_else(|| Error::Internal(format!("no key column `{k}`")))?;
                Ok(cast(c, t)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = self.converter.convert_columns(&cols)?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    }

    /// The key columns (silver types) of encoded keys, in order: [`encode`](Self::encode)'s
    /// inverse.
    pub fn decode(&self, keys: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        let parser = self.converter.parser();
        Ok(self
            .converter
            .convert_rows(keys.iter().map(|k| parser.parse(k)))?)
    }

    /// The key column names and their silver types.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &DataType)> {
        self.keys.iter().map(String::as_str).zip(&self.types)
    }
}
