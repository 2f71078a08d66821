//! [`Catalog`] over AWS Glue (`aws-sdk-glue`): the client is built once by the caller (the
//! function's `main`, the CLI) and passed in. Tables are written with `SkipArchive` so a
//! schema change does not pile up table versions; batch calls report per-partition errors,
//! of which "already exists" (create) and "not found" (delete) mean another sync got there
//! first.

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::model::{CatalogPartition, CatalogTable, Column};
use aws_sdk_glue::Client;
use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{
    Column as GlueColumn, DatabaseInput, PartitionInput, PartitionValueList, SerDeInfo,
    StorageDescriptor, TableInput,
};

/// The Glue Data Catalog of the client's account and region.
#[derive(Debug, Clone)]
pub struct GlueCatalog {
    client: Client,
}

impl GlueCatalog {
    /// Wrap a Glue client.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// Glue error codes the next run can get past.
const RETRYABLE_CODES: [&str; 5] = [
    "ThrottlingException",
    "InternalServiceException",
    "OperationTimeoutException",
    "ConcurrentModificationException",
    "ResourceNotReadyException",
];

fn code<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> Option<&str> {
    match e {
        SdkError::ServiceError(s) => s.err().code(),
        _ => None,
    }
}

fn failed<E, R>(op: &'static str, name: &str, e: SdkError<E, R>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let retryable = match &e {
        SdkError::ServiceError(_) => code(&e).is_some_and(|c| RETRYABLE_CODES.contains(&c)),
        // Timeouts, connection failures, unparsable responses.
        _ => true,
    };
    let message = match (code(&e), e.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_string(),
        _ => aws_sdk_glue::error::DisplayErrorContext(&e).to_string(),
    };
    Error::Catalog {
        op,
        name: name.to_string(),
        message,
        retryable,
    }
}

fn input_error(op: &'static str, name: &str, e: impl std::fmt::Display) -> Error {
    Error::Catalog {
        op,
        name: name.to_string(),
        message: format!("building the request: {e}"),
        retryable: false,
    }
}

fn glue_columns(op: &'static str, name: &str, columns: &[Column]) -> Result<Vec<GlueColumn>> {
    columns
        .iter()
        .map(|c| {
            GlueColumn::builder()
                .name(&c.name)
                .r#type(&c.type_name)
                .build()
                .map_err(|e| input_error(op, name, e))
        })
        .collect()
}

fn storage(op: &'static str, t: &CatalogTable, location: &str) -> Result<StorageDescriptor> {
    Ok(StorageDescriptor::builder()
        .set_columns(Some(glue_columns(op, &t.name, &t.columns)?))
        .location(location)
        .input_format(&t.input_format)
        .output_format(&t.output_format)
        .serde_info(SerDeInfo::builder().serialization_library(&t.serde).build())
        .build())
}

fn table_input(op: &'static str, t: &CatalogTable) -> Result<TableInput> {
    TableInput::builder()
        .name(&t.name)
        .table_type("EXTERNAL_TABLE")
        .storage_descriptor(storage(op, t, &t.location)?)
        .set_partition_keys(Some(glue_columns(op, &t.name, &t.partition_keys)?))
        .set_parameters(Some(t.parameters.clone().into_iter().collect()))
        .build()
        .map_err(|e| input_error(op, &t.name, e))
}

fn from_glue(t: &aws_sdk_glue::types::Table) -> CatalogTable {
    let columns = |cs: &[GlueColumn]| {
        cs.iter()
            .map(|c| Column {
                name: c.name().to_string(),
                type_name: c.r#type().unwrap_or_default().to_string(),
            })
            .collect()
    };
    let sd = t.storage_descriptor();
    CatalogTable {
        name: t.name().to_string(),
        location: sd
            .and_then(|s| s.location())
            .unwrap_or_default()
            .to_string(),
        columns: sd.map(|s| columns(s.columns())).unwrap_or_default(),
        partition_keys: columns(t.partition_keys()),
        input_format: sd
            .and_then(|s| s.input_format())
            .unwrap_or_default()
            .to_string(),
        output_format: sd
            .and_then(|s| s.output_format())
            .unwrap_or_default()
            .to_string(),
        serde: sd
            .and_then(|s| s.serde_info())
            .and_then(|s| s.serialization_library())
            .unwrap_or_default()
            .to_string(),
        parameters: t
            .parameters()
            .map(|p| p.clone().into_iter().collect())
            .unwrap_or_default(),
    }
}

#[async_trait::async_trait]
impl Catalog for GlueCatalog {
    async fn database_exists(&self, database: &str) -> Result<bool> {
        match self.client.get_database().name(database).send().await {
            Ok(_) => Ok(true),
            Err(e) if code(&e) == Some("EntityNotFoundException") => Ok(false),
            Err(e) => Err(failed("GetDatabase", database, e)),
        }
    }

    async fn create_database(&self, database: &str) -> Result<()> {
        let input = DatabaseInput::builder()
            .name(database)
            .description("Tables of the lake, registered by Lakestream (`lakestream catalog sync`)")
            .build()
            .map_err(|e| input_error("CreateDatabase", database, e))?;
        match self
            .client
            .create_database()
            .database_input(input)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if code(&e) == Some("AlreadyExistsException") => Ok(()),
            Err(e) => Err(failed("CreateDatabase", database, e)),
        }
    }

    async fn get_table(&self, database: &str, name: &str) -> Result<Option<CatalogTable>> {
        match self
            .client
            .get_table()
            .database_name(database)
            .name(name)
            .send()
            .await
        {
            Ok(out) => Ok(out.table.as_ref().map(from_glue)),
            Err(e) if code(&e) == Some("EntityNotFoundException") => Ok(None),
            Err(e) => Err(failed("GetTable", name, e)),
        }
    }

    async fn create_table(&self, database: &str, table: &CatalogTable) -> Result<bool> {
        let input = table_input("CreateTable", table)?;
        match self
            .client
            .create_table()
            .database_name(database)
            .table_input(input)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if code(&e) == Some("AlreadyExistsException") => Ok(false),
            Err(e) => Err(failed("CreateTable", &table.name, e)),
        }
    }

    async fn update_table(&self, database: &str, table: &CatalogTable) -> Result<()> {
        let input = table_input("UpdateTable", table)?;
        self.client
            .update_table()
            .database_name(database)
            .table_input(input)
            .skip_archive(true)
            .send()
            .await
            .map_err(|e| failed("UpdateTable", &table.name, e))?;
        Ok(())
    }

    async fn partition_values(&self, database: &str, name: &str) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .get_partitions()
                .database_name(database)
                .table_name(name)
                .exclude_column_schema(true)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| failed("GetPartitions", name, e))?;
            out.extend(page.partitions().iter().map(|p| p.values().to_vec()));
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    async fn create_partitions(
        &self,
        database: &str,
        table: &CatalogTable,
        partitions: &[CatalogPartition],
    ) -> Result<usize> {
        let inputs = partitions
            .iter()
            .map(|p| {
                Ok(PartitionInput::builder()
                    .set_values(Some(p.values.clone()))
                    .storage_descriptor(storage("BatchCreatePartition", table, &p.location)?)
                    .build())
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self
            .client
            .batch_create_partition()
            .database_name(database)
            .table_name(&table.name)
            .set_partition_input_list(Some(inputs))
            .send()
            .await
            .map_err(|e| failed("BatchCreatePartition", &table.name, e))?;
        partition_errors(
            "BatchCreatePartition",
            &table.name,
            out.errors(),
            "AlreadyExistsException",
            partitions.len(),
        )
    }

    async fn delete_partitions(
        &self,
        database: &str,
        name: &str,
        values: &[Vec<String>],
    ) -> Result<usize> {
        let lists = values
            .iter()
            .map(|v| {
                PartitionValueList::builder()
                    .set_values(Some(v.clone()))
                    .build()
                    .map_err(|e| input_error("BatchDeletePartition", name, e))
            })
            .collect::<Result<Vec<_>>>()?;
        let out = self
            .client
            .batch_delete_partition()
            .database_name(database)
            .table_name(name)
            .set_partitions_to_delete(Some(lists))
            .send()
            .await
            .map_err(|e| failed("BatchDeletePartition", name, e))?;
        partition_errors(
            "BatchDeletePartition",
            name,
            out.errors(),
            "EntityNotFoundException",
            values.len(),
        )
    }
}

/// How many of `sent` partitions the batch call changed: its per-partition errors of code
/// `done_code` were changed already (by another sync); any other fails the call (without the
/// values, which are record values).
fn partition_errors(
    op: &'static str,
    name: &str,
    errors: &[aws_sdk_glue::types::PartitionError],
    done_code: &str,
    sent: usize,
) -> Result<usize> {
    let mut done_before = 0;
    for e in errors {
        let code = e.error_detail().and_then(|d| d.error_code()).unwrap_or("");
        if code == done_code {
            done_before += 1;
        } else {
            return Err(Error::Catalog {
                op,
                name: name.to_string(),
                // Glue's per-partition message quotes the values (record values): left out.
                message: format!(
                    "{} of {sent} partitions failed, e.g. {code} (a value Glue refuses: longer \
                     than 1024 bytes, or characters it does not take?)",
                    errors.len()
                ),
                retryable: RETRYABLE_CODES.contains(&code),
            });
        }
    }
    Ok(sent - done_before)
}
