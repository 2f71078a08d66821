//! Table handles kept warm across invocations of a Lambda: an ingestor built once in `main`
//! keeps one [`TableHandle`] per table it writes, so a warm invocation costs no table load and
//! no `txn` lookup. Both ingestors (Kafka records, access-log objects) keep theirs here.
//!
//! A handle is *taken out* while a batch uses it and *put back* after, so two concurrent
//! batches never share one handle's head. Taking a warm handle first proves that the table is
//! still the one it loaded ([`TableHandle::revalidate`]: one HEAD); a table deleted or
//! re-created since is loaded again, so its cached `txn`s never skip a record.

use super::TableHandle;
use crate::error::Result;
use crate::storage::Lake;
use std::collections::HashMap;
use std::sync::Mutex;

/// Warm table handles by table name (a handle in use is not in the cache).
#[derive(Debug, Default)]
pub struct WarmHandles {
    handles: Mutex<HashMap<String, TableHandle>>,
}

impl WarmHandles {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The warm handle of `table`, proved to be on the table it loaded, else a new handle on
    /// `table` in `lake` (nothing read yet). Put it back with [`put`](Self::put) after use.
    /// A revalidation that fails (a storage error, retryable) puts the handle back unchanged.
    pub async fn take(&self, lake: &Lake, table: &str) -> Result<TableHandle> {
        let cached = self.handles.lock().ok().and_then(|mut m| m.remove(table));
        match cached {
            Some(mut h) => match h.revalidate().await {
                Ok(_) => Ok(h),
                Err(e) => {
                    self.put(h);
                    Err(e)
                }
            },
            None => TableHandle::open(lake, table),
        }
    }

    /// [`take`](Self::take) and a [`refresh`](TableHandle::refresh) at once: the identity HEAD
    /// and the GET of the next commit in flight together
    /// ([`TableHandle::revalidate_and_refresh`]), a handle not kept loaded from storage. The
    /// handle is at the latest version (or does not exist). A failed HEAD or GET puts the kept
    /// handle back as it was (as `take` does); a load that failed part-way drops it, so the
    /// next take loads the table again.
    pub async fn take_fresh(&self, lake: &Lake, table: &str) -> Result<TableHandle> {
        let cached = self.handles.lock().ok().and_then(|mut m| m.remove(table));
        let mut h = match cached {
            Some(h) => h,
            None => TableHandle::open(lake, table)?,
        };
        let looked = match h.prove_and_look().await {
            Ok(looked) => looked,
            Err(e) => {
                self.put(h);
                return Err(e);
            }
        };
        match looked {
            Some(advanced) => h.refresh_after(Some(advanced)).await?,
            None => h.refresh().await?,
        };
        Ok(h)
    }

    /// The kept handle of `table` as it is, without revalidating it (a caller that proved it
    /// moments ago, in the same invocation). `None` when none is kept.
    pub fn take_as_is(&self, table: &str) -> Option<TableHandle> {
        self.handles.lock().ok()?.remove(table)
    }

    /// The table id (`metaData.id`) of `table`'s kept handle, when one is kept and loaded (no
    /// request): which table a caller's progress on it belongs to.
    pub fn table_id(&self, table: &str) -> Option<String> {
        let handles = self.handles.lock().ok()?;
        let h = handles.get(table).filter(|h| h.exists())?;
        h.table_id().ok()
    }

    /// The version of `table`'s kept handle, when one is kept and loaded (no request).
    pub fn version(&self, table: &str) -> Option<u64> {
        let handles = self.handles.lock().ok()?;
        handles.get(table).filter(|h| h.exists())?.version()
    }

    /// Keep `handle` warm for the next [`take`](Self::take) of its table.
    pub fn put(&self, handle: TableHandle) {
        if let Ok(mut m) = self.handles.lock() {
            m.insert(handle.name().to_string(), handle);
        }
    }
}
