//! What a commit changes, and the check that decides whether it may land on a table that moved
//! since it was planned (the conflict table in ARCHITECTURE.md "Commit protocol").
//!
//! delta-rs's own conflict checker ignores a winning commit's removes with `dataChange=false`
//! (two compactions of one file both pass it), so the engine never relies on it: it reads every
//! commit between the planning snapshot and the one it commits on and applies the rules below.

use deltalake::kernel::{Add, AddCDCFile, Remove, Transaction};
use deltalake::protocol::DeltaOperation;
use std::collections::{BTreeSet, HashSet};

/// What a change read when it was planned, i.e. what a concurrent commit may not touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadScope {
    /// A blind append: depends only on its `txn` versions and the table schema.
    Append,
    /// A rewrite of named files (compaction): depends on every removed file still being live.
    Files,
    /// Reads the whole table (upsert, delete, join output): any data change conflicts.
    Table,
}

/// One commit's worth of change, planned from the table at [`Change::read_version`].
#[derive(Debug, Clone)]
pub struct Change {
    /// The version the change was planned from (`None`: the table did not exist). The engine
    /// checks the change against *every* commit after it before it lands, however the handle
    /// moved in between (transient errors, dropped bins, earlier commits of the same run).
    pub read_version: Option<u64>,
    /// The operation recorded in the log (`WRITE`, `OPTIMIZE`, `MERGE`, ...).
    pub operation: DeltaOperation,
    /// Data files to add (already written).
    pub adds: Vec<Add>,
    /// Files to remove (`dataChange` per action).
    pub removes: Vec<Remove>,
    /// Idempotency state committed with the data.
    pub txns: Vec<Transaction>,
    /// What the plan read (decides which concurrent commits conflict).
    pub scope: ReadScope,
    /// Table properties set by this commit (a `metaData` action with them added).
    pub properties: Vec<(String, String)>,
    /// Change data feed files (`cdc` actions, already written under `_change_data/`, see
    /// [`write_change_data`](super::change_data::write_change_data)) committed with the adds
    /// and removes. Required when the change removes files with `dataChange = true` on a table
    /// with `delta.enableChangeDataFeed = true`.
    pub cdc_files: Vec<AddCDCFile>,
    /// Application fields of the commit's `commitInfo` (besides the commit id), e.g. a keyed
    /// run's inline tombstones ([`crate::refine::keyed::pending`]).
    pub info: Vec<(String, serde_json::Value)>,
}

/// The `MERGE` a keyed rewrite records (an upsert, an aggregate): rows matched on `keys`,
/// updated where `matched` holds, inserted otherwise.
pub fn keyed_merge(keys: &[String], matched: String) -> DeltaOperation {
    use deltalake::protocol::MergePredicate;
    let on = keys
        .iter()
        .map(|k| format!("target.{k} = source.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    DeltaOperation::Merge {
        predicate: None,
        merge_predicate: Some(on),
        matched_predicates: vec![MergePredicate {
            action_type: "update".into(),
            predicate: Some(matched),
        }],
        not_matched_predicates: vec![MergePredicate {
            action_type: "insert".into(),
            predicate: None,
        }],
        not_matched_by_source_predicates: vec![],
    }
}

impl Change {
    /// An append of `adds` with `txns`, planned from `read_version`.
    pub fn append(
        read_version: Option<u64>,
        operation: DeltaOperation,
        adds: Vec<Add>,
        txns: Vec<Transaction>,
    ) -> Self {
        Self {
            read_version,
            operation,
            adds,
            removes: vec![],
            txns,
            scope: ReadScope::Append,
            properties: vec![],
            cdc_files: vec![],
            info: vec![],
        }
    }

    /// The removed paths (delta-rs keeps them decoded in memory; the log stores them encoded).
    fn removed_paths(&self) -> HashSet<&str> {
        self.removes.iter().map(|r| r.path.as_str()).collect()
    }
}

/// Why a change may not land on a newer version; the caller re-plans from a fresh snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conflict {
    /// The first conflicting version.
    pub version: u64,
    /// Human-readable reason.
    pub reason: String,
    /// Files this change removes that a concurrent commit already removed (decoded paths).
    pub gone: BTreeSet<String>,
    /// Nothing conflicted, but other writers kept taking the next version faster than the
    /// change could be rebased: the same change may simply be tried again after a backoff.
    pub contended: bool,
}

/// The actions of one commit file that matter to the conflict check.
#[derive(Debug, Default)]
pub(crate) struct CommitSummary {
    /// Version of the commit.
    pub version: u64,
    /// `lakestream.commitId` of the commit, if it was ours.
    pub commit_id: Option<String>,
    /// Added paths with their `dataChange`.
    pub adds: Vec<(String, bool)>,
    /// Removed paths with their `dataChange`.
    pub removes: Vec<(String, bool)>,
    /// `txn` appIds.
    pub txn_ids: Vec<String>,
    /// A `metaData` action (schema, partitioning or properties changed).
    pub metadata: bool,
    /// A `protocol` action.
    pub protocol: bool,
}

impl CommitSummary {
    /// Parse a commit file (newline-delimited JSON actions). Unknown lines are skipped.
    pub fn parse(version: u64, bytes: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Line {
            add: Option<File>,
            remove: Option<File>,
            #[serde(rename = "metaData")]
            metadata: Option<serde::de::IgnoredAny>,
            protocol: Option<serde::de::IgnoredAny>,
            txn: Option<Txn>,
            #[serde(rename = "commitInfo")]
            commit_info: Option<serde_json::Map<String, serde_json::Value>>,
        }
        #[derive(serde::Deserialize)]
        struct File {
            path: String,
            #[serde(rename = "dataChange", default)]
            data_change: bool,
        }
        #[derive(serde::Deserialize)]
        struct Txn {
            #[serde(rename = "appId")]
            app_id: String,
        }
        let mut s = CommitSummary {
            version,
            ..Default::default()
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(l) = serde_json::from_slice::<Line>(line) else {
                continue;
            };
            if let Some(a) = l.add {
                s.adds.push((decode(&a.path), a.data_change));
            }
            if let Some(r) = l.remove {
                s.removes.push((decode(&r.path), r.data_change));
            }
            if let Some(t) = l.txn {
                s.txn_ids.push(t.app_id);
            }
            s.metadata |= l.metadata.is_some();
            s.protocol |= l.protocol.is_some();
            if let Some(info) = l.commit_info {
                s.commit_id = info
                    .get(COMMIT_ID_KEY)
                    .and_then(|v| v.as_str())
                    .map(str::to_string);
            }
        }
        s
    }
}

/// Key of our commit id in `commitInfo`.
pub const COMMIT_ID_KEY: &str = "lakestream.commitId";

/// Check `change` against one commit that landed after its base version.
pub(crate) fn check(change: &Change, winner: &CommitSummary) -> Result<(), Conflict> {
    let conflict = |reason: String, gone: BTreeSet<String>| {
        Err(Conflict {
            version: winner.version,
            reason,
            gone,
            contended: false,
        })
    };
    if winner.protocol {
        return conflict("the table protocol changed".into(), BTreeSet::new());
    }
    if winner.metadata {
        return conflict(
            "the table metadata (schema, partitioning or properties) changed".into(),
            BTreeSet::new(),
        );
    }
    let ours: HashSet<&str> = change.txns.iter().map(|t| t.app_id.as_str()).collect();
    if let Some(id) = winner.txn_ids.iter().find(|id| ours.contains(id.as_str())) {
        return conflict(
            format!("another writer committed `txn` {id}"),
            BTreeSet::new(),
        );
    }
    let removed = change.removed_paths();
    let gone: BTreeSet<String> = winner
        .removes
        .iter()
        .filter(|(p, _)| removed.contains(p.as_str()))
        .map(|(p, _)| p.clone())
        .collect();
    if !gone.is_empty() {
        return conflict(
            format!(
                "{} file(s) this change removes were already removed",
                gone.len()
            ),
            gone,
        );
    }
    if change.scope == ReadScope::Table {
        let data_change = winner.adds.iter().chain(&winner.removes).any(|(_, dc)| *dc);
        if data_change {
            return conflict(
                "another writer changed the data this change read".into(),
                BTreeSet::new(),
            );
        }
    }
    Ok(())
}

/// Check `change` against every commit that landed after its read version (`winners`, in
/// version order). Conflicts that only name removed files are gathered over *all* winners, so
/// a caller that drops the affected work (compaction bins) learns every file gone at once;
/// any other conflict stops the check.
pub(crate) fn check_all(change: &Change, winners: &[CommitSummary]) -> Result<(), Conflict> {
    let mut gone = BTreeSet::new();
    let mut first = None;
    for w in winners {
        match check(change, w) {
            Ok(()) => {}
            Err(c) if !c.gone.is_empty() => {
                first.get_or_insert(c.version);
                gone.extend(c.gone);
            }
            Err(c) => return Err(c),
        }
    }
    match first {
        None => Ok(()),
        Some(version) => Err(Conflict {
            version,
            reason: format!(
                "{} file(s) this change removes were already removed (first at version {version})",
                gone.len()
            ),
            gone,
            contended: false,
        }),
    }
}

use crate::partition_path::decode;

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::protocol::SaveMode;

    fn remove(path: &str) -> Remove {
        Remove {
            path: path.into(),
            data_change: false,
            deletion_timestamp: Some(1),
            extended_file_metadata: None,
            partition_values: None,
            size: None,
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
        }
    }

    fn change(scope: ReadScope, removes: Vec<Remove>, txn: Option<&str>) -> Change {
        Change {
            read_version: Some(0),
            properties: vec![],
            operation: DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
            adds: vec![],
            removes,
            txns: txn.map(|t| Transaction::new(t, 1)).into_iter().collect(),
            scope,
            cdc_files: vec![],
            info: vec![],
        }
    }

    const APPEND: &[u8] = br#"{"commitInfo":{"operation":"WRITE","lakestream.commitId":"abc"}}
{"txn":{"appId":"p/orders/1","version":9}}
{"add":{"path":"year=26/x%20y.parquet","size":1,"partitionValues":{},"modificationTime":1,"dataChange":true}}"#;
    const COMPACTION: &[u8] = br#"{"commitInfo":{"operation":"OPTIMIZE"}}
{"add":{"path":"big.parquet","size":9,"partitionValues":{},"modificationTime":1,"dataChange":false}}
{"remove":{"path":"a%3Db.parquet","deletionTimestamp":1,"dataChange":false}}"#;
    const SCHEMA: &[u8] = br#"{"metaData":{"id":"x"}}"#;

    #[test]
    fn summaries_read_every_action_that_matters() {
        let s = CommitSummary::parse(3, APPEND);
        assert_eq!(s.commit_id.as_deref(), Some("abc"));
        assert_eq!(s.txn_ids, ["p/orders/1"]);
        assert_eq!(s.adds, [("year=26/x y.parquet".to_string(), true)]);
        let c = CommitSummary::parse(4, COMPACTION);
        assert_eq!(c.removes, [("a=b.parquet".to_string(), false)]);
        assert!(CommitSummary::parse(5, SCHEMA).metadata);
    }

    /// One assertion per cell of the conflict table that can happen here.
    #[test]
    fn conflict_table() {
        let append = CommitSummary::parse(3, APPEND);
        let compaction = CommitSummary::parse(4, COMPACTION);
        let schema = CommitSummary::parse(5, SCHEMA);
        let blind = change(ReadScope::Append, vec![], Some("p/orders/0"));
        let same_txn = change(ReadScope::Append, vec![], Some("p/orders/1"));
        let rewrite_a = change(ReadScope::Files, vec![remove("a=b.parquet")], None);
        let rewrite_c = change(ReadScope::Files, vec![remove("c.parquet")], None);
        let upsert_c = change(ReadScope::Table, vec![remove("c.parquet")], None);
        let upsert_a = change(ReadScope::Table, vec![remove("a=b.parquet")], None);

        // append vs append: other partitions pass, the same appId re-plans.
        assert!(check(&blind, &append).is_ok());
        assert!(check(&same_txn, &append).is_err());
        // append vs compaction: no conflict (dataChange=false, nothing removed by us).
        assert!(check(&blind, &compaction).is_ok());
        // compaction vs append: appends never touch the files it rewrites.
        assert!(check(&rewrite_a, &append).is_ok());
        // compaction vs compaction of the same file: conflict, even with dataChange=false.
        let gone = check(&rewrite_a, &compaction).err().map(|c| c.gone);
        assert_eq!(gone, Some(BTreeSet::from(["a=b.parquet".to_string()])));
        // compaction vs compaction of other files: both land.
        assert!(check(&rewrite_c, &compaction).is_ok());
        // upsert vs append: the upsert read the table, new data conflicts.
        assert!(check(&upsert_c, &append).is_err());
        // upsert vs compaction of other files: same rows, no conflict; of its files: conflict.
        assert!(check(&upsert_c, &compaction).is_ok());
        assert!(check(&upsert_a, &compaction).is_err());
        // anything vs a schema change: re-plan.
        for c in [&blind, &rewrite_a, &upsert_c] {
            assert!(check(c, &schema).is_err());
        }
    }

    /// Defect 1 (c): two winners each removed a file of a different bin; the check reports
    /// both (the old check stopped at the first winner, and the retry landed over the second).
    #[test]
    fn every_winner_is_checked_and_every_gone_file_reported() {
        let first = CommitSummary::parse(4, COMPACTION);
        let second = CommitSummary::parse(
            5,
            br#"{"remove":{"path":"c.parquet","deletionTimestamp":1,"dataChange":true}}"#,
        );
        let both = change(
            ReadScope::Files,
            vec![remove("a=b.parquet"), remove("c.parquet")],
            None,
        );
        let gone = check_all(&both, &[first, second]).err().map(|c| c.gone);
        assert_eq!(
            gone,
            Some(BTreeSet::from([
                "a=b.parquet".to_string(),
                "c.parquet".to_string()
            ]))
        );
        let clean = CommitSummary::parse(6, APPEND);
        assert!(check_all(&both, &[clean]).is_ok());
    }
}
