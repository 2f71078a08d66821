//! One commit file summarised ([`parse_commit`] -> [`HistoryEntry`]): its operation, commit
//! times, files, rows and bytes added and removed, `txn`s and our commit id. What `DESCRIBE
//! HISTORY` shows per commit (the `inspect` module) and where the commit times of a reader's
//! first unread version come from (maintenance's readers). Reads no storage.

use super::change::COMMIT_ID_KEY;
use crate::table::CommitInfo;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// One commit.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HistoryEntry {
    /// Table version.
    pub version: u64,
    /// The commit's time, the one `show --as-of` resolves by (`inspect::commit_times`): the
    /// in-commit timestamp on tables that have them, else the commit file's modification time
    /// (milliseconds, strictly increasing). `None` only from [`parse_commit`] alone.
    pub timestamp: Option<DateTime<Utc>>,
    /// `commitInfo.timestamp`: the writer's clock when it committed (not used for time travel).
    pub commit_info_timestamp: Option<DateTime<Utc>>,
    /// `commitInfo.inCommitTimestamp`, when the writer recorded one.
    pub in_commit_timestamp: Option<DateTime<Utc>>,
    /// `commitInfo.operation` (e.g. `WRITE`, `OPTIMIZE`, `VACUUM END`).
    pub operation: Option<String>,
    /// `commitInfo.operationParameters`.
    pub parameters: Map<String, Value>,
    /// True when any added or removed file has `dataChange = true` (compaction has none).
    pub data_change: bool,
    /// Files added.
    pub files_added: u64,
    /// Rows in added files (from their statistics).
    pub rows_added: u64,
    /// Bytes of added files.
    pub bytes_added: u64,
    /// Files removed.
    pub files_removed: u64,
    /// Rows in removed files, when every remove carried statistics.
    pub rows_removed: Option<u64>,
    /// Bytes of removed files (when the removes carry sizes).
    pub bytes_removed: u64,
    /// `txn` actions: (appId, version), e.g. the Kafka offsets the commit covers.
    pub txns: Vec<(String, i64)>,
    /// Our commit id (`commitInfo["lakestream.commitId"]`) when a Lakestream writer made it.
    pub commit_id: Option<String>,
    /// The commit changed the schema or table properties.
    pub metadata: bool,
}

impl HistoryEntry {
    /// When the writer says it committed: `inCommitTimestamp`, else `commitInfo.timestamp`.
    pub fn written_at(&self) -> Option<DateTime<Utc>> {
        self.in_commit_timestamp.or(self.commit_info_timestamp)
    }
}

/// Summarize one commit file (lines that are not actions we know are skipped).
pub fn parse_commit(version: u64, bytes: &[u8]) -> HistoryEntry {
    let mut e = HistoryEntry {
        version,
        rows_removed: Some(0),
        ..Default::default()
    };
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(Value::Object(action)) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let Some(Value::Object(info)) = action.get("commitInfo") {
            let read = CommitInfo::from_action(info);
            e.in_commit_timestamp = read.in_commit_timestamp;
            e.commit_info_timestamp = read.timestamp;
            e.operation = read.operation;
            if let Some(Value::Object(p)) = info.get("operationParameters") {
                e.parameters = p.clone();
            }
            e.commit_id = info
                .get(COMMIT_ID_KEY)
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(add) = action.get("add") {
            e.files_added += 1;
            e.bytes_added += add.get("size").and_then(Value::as_u64).unwrap_or(0);
            e.rows_added += num_records(add).unwrap_or(0);
            e.data_change |= add
                .get("dataChange")
                .and_then(Value::as_bool)
                .unwrap_or(true);
        }
        if let Some(remove) = action.get("remove") {
            e.files_removed += 1;
            e.bytes_removed += remove.get("size").and_then(Value::as_u64).unwrap_or(0);
            e.rows_removed = e.rows_removed.zip(num_records(remove)).map(|(a, b)| a + b);
            e.data_change |= remove
                .get("dataChange")
                .and_then(Value::as_bool)
                .unwrap_or(true);
        }
        if let Some(txn) = action.get("txn")
            && let (Some(app), Some(v)) = (
                txn.get("appId").and_then(Value::as_str),
                txn.get("version").and_then(Value::as_i64),
            )
        {
            e.txns.push((app.to_string(), v));
        }
        e.metadata |= action.contains_key("metaData");
    }
    if e.files_removed == 0 {
        e.rows_removed = Some(0);
    }
    e
}

/// `numRecords` from a file action's `stats` (a JSON string).
fn num_records(file: &Value) -> Option<u64> {
    let stats = file.get("stats")?.as_str()?;
    serde_json::from_str::<Value>(stats)
        .ok()?
        .get("numRecords")?
        .as_u64()
}

#[cfg(test)]
mod tests {
    use super::parse_commit;

    #[test]
    fn a_compaction_commit_is_summarized_from_its_actions() {
        let log = br#"{"commitInfo":{"timestamp":1764537184835,"operation":"OPTIMIZE","operationParameters":{"targetSize":"134217728"},"lakestream.commitId":"abc"}}
{"add":{"path":"a.parquet","size":300,"dataChange":false,"stats":"{\"numRecords\":7}"}}
{"remove":{"path":"b.parquet","size":100,"dataChange":false,"stats":"{\"numRecords\":3}"}}
{"remove":{"path":"c.parquet","size":150,"dataChange":false,"stats":"{\"numRecords\":4}"}}
not json
"#;
        let e = parse_commit(12, log);
        assert_eq!(e.version, 12);
        assert_eq!(e.operation.as_deref(), Some("OPTIMIZE"));
        assert_eq!(e.commit_id.as_deref(), Some("abc"));
        assert!(!e.data_change);
        assert_eq!((e.files_added, e.rows_added, e.bytes_added), (1, 7, 300));
        assert_eq!(
            (e.files_removed, e.rows_removed, e.bytes_removed),
            (2, Some(7), 250)
        );
        assert_eq!(e.parameters["targetSize"], "134217728");
        assert_eq!(
            e.commit_info_timestamp.map(|t| t.timestamp_millis()),
            Some(1764537184835)
        );
        assert_eq!(e.in_commit_timestamp, None);
    }

    #[test]
    fn in_commit_timestamps_are_read_and_unknown_row_counts_stay_unknown() {
        let log = br#"{"commitInfo":{"timestamp":5,"inCommitTimestamp":9,"operation":"WRITE"}}
{"txn":{"appId":"p/orders/0","version":41}}
{"remove":{"path":"b.parquet","dataChange":true}}
"#;
        let e = parse_commit(1, log);
        assert_eq!(e.in_commit_timestamp.map(|t| t.timestamp_millis()), Some(9));
        assert_eq!(
            e.commit_info_timestamp.map(|t| t.timestamp_millis()),
            Some(5)
        );
        assert_eq!(e.txns, [("p/orders/0".to_string(), 41)]);
        assert_eq!(e.rows_removed, None);
        assert!(e.data_change);
    }
}
