//! The catalog calls a sync makes, behind a small trait: [`crate::GlueCatalog`] is AWS Glue;
//! [`MemoryCatalog`] holds the same state in memory (tests, and counting the calls a sync
//! makes).

use crate::error::Result;
use crate::model::{CatalogPartition, CatalogTable};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// A data catalog: databases, tables, partitions.
#[async_trait::async_trait]
pub trait Catalog: Send + Sync {
    /// Whether `database` exists.
    async fn database_exists(&self, database: &str) -> Result<bool>;
    /// Create `database`; one that exists already (another sync made it) is not an error.
    async fn create_database(&self, database: &str) -> Result<()>;
    /// The table, or `None`.
    async fn get_table(&self, database: &str, name: &str) -> Result<Option<CatalogTable>>;
    /// Create the table; `false` when one of that name exists already (another sync made it).
    async fn create_table(&self, database: &str, table: &CatalogTable) -> Result<bool>;
    /// Replace the table's definition.
    async fn update_table(&self, database: &str, table: &CatalogTable) -> Result<()>;
    /// The values of every partition of the table.
    async fn partition_values(&self, database: &str, name: &str) -> Result<Vec<Vec<String>>>;
    /// Register partitions (the caller batches them); ones that exist already are skipped.
    /// Returns how many were new.
    async fn create_partitions(
        &self,
        database: &str,
        table: &CatalogTable,
        partitions: &[CatalogPartition],
    ) -> Result<usize>;
    /// Deregister partitions by values (the caller batches them); ones already gone are
    /// skipped. Returns how many were removed.
    async fn delete_partitions(
        &self,
        database: &str,
        name: &str,
        values: &[Vec<String>],
    ) -> Result<usize>;
}

/// An in-memory catalog with a log of the changing calls it served.
#[derive(Debug, Default)]
pub struct MemoryCatalog {
    state: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    databases: BTreeSet<String>,
    tables: BTreeMap<(String, String), CatalogTable>,
    partitions: BTreeMap<(String, String), BTreeMap<Vec<String>, CatalogPartition>>,
    calls: Vec<String>,
}

impl MemoryCatalog {
    /// The changing calls made so far (`CreateTable raw_order`, ...).
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// A table as stored.
    pub fn table(&self, database: &str, name: &str) -> Option<CatalogTable> {
        self.lock()
            .tables
            .get(&(database.to_string(), name.to_string()))
            .cloned()
    }

    /// Put a table in as someone else would (no checks).
    pub fn put_table(&self, database: &str, table: CatalogTable) {
        let mut m = self.lock();
        m.databases.insert(database.to_string());
        m.tables
            .insert((database.to_string(), table.name.clone()), table);
    }

    /// The partitions of a table.
    pub fn partitions(&self, database: &str, name: &str) -> Vec<CatalogPartition> {
        self.lock()
            .partitions
            .get(&(database.to_string(), name.to_string()))
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        // A panic while holding the lock leaves consistent data (every change is one insert).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl Catalog for MemoryCatalog {
    async fn database_exists(&self, database: &str) -> Result<bool> {
        Ok(self.lock().databases.contains(database))
    }

    async fn create_database(&self, database: &str) -> Result<()> {
        let mut m = self.lock();
        m.calls.push(format!("CreateDatabase {database}"));
        m.databases.insert(database.to_string());
        Ok(())
    }

    async fn get_table(&self, database: &str, name: &str) -> Result<Option<CatalogTable>> {
        Ok(self.table(database, name))
    }

    async fn create_table(&self, database: &str, table: &CatalogTable) -> Result<bool> {
        let mut m = self.lock();
        m.calls.push(format!("CreateTable {}", table.name));
        let key = (database.to_string(), table.name.clone());
        if m.tables.contains_key(&key) {
            return Ok(false);
        }
        m.tables.insert(key, table.clone());
        Ok(true)
    }

    async fn update_table(&self, database: &str, table: &CatalogTable) -> Result<()> {
        let mut m = self.lock();
        m.calls.push(format!("UpdateTable {}", table.name));
        m.tables
            .insert((database.to_string(), table.name.clone()), table.clone());
        Ok(())
    }

    async fn partition_values(&self, database: &str, name: &str) -> Result<Vec<Vec<String>>> {
        Ok(self
            .partitions(database, name)
            .into_iter()
            .map(|p| p.values)
            .collect())
    }

    async fn create_partitions(
        &self,
        database: &str,
        table: &CatalogTable,
        partitions: &[CatalogPartition],
    ) -> Result<usize> {
        let mut m = self.lock();
        m.calls.push(format!(
            "BatchCreatePartition {} ({})",
            table.name,
            partitions.len()
        ));
        let held = m
            .partitions
            .entry((database.to_string(), table.name.clone()))
            .or_default();
        let mut new = 0;
        for p in partitions {
            if held.insert(p.values.clone(), p.clone()).is_none() {
                new += 1;
            }
        }
        Ok(new)
    }

    async fn delete_partitions(
        &self,
        database: &str,
        name: &str,
        values: &[Vec<String>],
    ) -> Result<usize> {
        let mut m = self.lock();
        m.calls
            .push(format!("BatchDeletePartition {name} ({})", values.len()));
        let held = m
            .partitions
            .entry((database.to_string(), name.to_string()))
            .or_default();
        Ok(values.iter().filter(|v| held.remove(*v).is_some()).count())
    }
}
