//! `--rebuild`: a job's output emptied and its sources marked unread, in one commit on the one
//! commit loop, so the next run computes it again from the start. A CDC apply's first run reads
//! bronze's snapshot (`refine::source::read_snapshot`), so a silver can be rebuilt however long
//! ago bronze's early log was cleaned; a CDC job also rebuilds itself when another writer
//! removed rows from its bronze (a GDPR erasure: [`Error::SourceRewritten`]).
//!
//! The reset removes every live file of the output with `dataChange = true` and adds none, so
//! readers of the change data feed see every row deleted (a commit that only removes whole
//! files needs no change files), and the next run's commit inserts the rebuilt rows. Between
//! the two commits the output is empty. Side tables stay: an SCD1 tombstone or an SCD2 stored
//! delete is an event bronze still holds (or held), so the rebuilt history is the same
//! function of the key's changes (a side-table entry ranked under an earlier `position_resets`
//! list keeps its old rank: README "CDC: position resets"). A CDC job's reset commit records
//! the `position_resets` the silver is rebuilt under.

use super::context::{RunContext, source_id_property};
use crate::commit::{self, ChangePlanner, Proposal, ReadScope, TableState};
use crate::error::{Error, Result};
use crate::refine::cdc::scd1::TRUNCATED_AT_TIME_PROPERTY;
use crate::table::TableHandle;
use deltalake::kernel::Transaction;
use deltalake::protocol::DeltaOperation;
use lakestream_formats::config::silver;
use lakestream_formats::refine::{JobKind, RefineJob};

/// Reset `cfg`'s output: every live file removed, every source's `txn` set to `-1` (nothing
/// consumed) and its table id recorded anew, in one commit. `None`: there is no output yet
/// (its first run builds it). Joins keep state beside their output and are refused.
pub async fn rebuild(ctx: &RunContext<'_>, cfg: &RefineJob) -> Result<Option<u64>> {
    reset(ctx, cfg, None).await
}

/// The longest `__seq` an operator may void (positions are at most ~60 characters).
const MAX_SEQ_LEN: usize = 200;

/// `--void-truncate`: a CDC apply's output rebuilt (as [`rebuild`]) with the truncate at `seq`
/// (its `__seq` in bronze) added to its voided ones ([`silver::VOID_TRUNCATES_PROPERTY`]) in
/// the reset commit, so the rebuilt silver has the rows a forged or mistaken truncate removed
/// and later runs ignore it (from bronze, a redelivery or an SCD2 job's side table). Refused
/// for a job without an output yet (nothing to record the void on). Returns the reset
/// version.
pub async fn void_truncate(ctx: &RunContext<'_>, cfg: &RefineJob, seq: &str) -> Result<u64> {
    let JobKind::Cdc(apply) = &cfg.kind else {
        return Err(Error::Config(format!(
            "refine job `{}`: --void-truncate applies to CDC apply jobs only",
            cfg.job
        )));
    };
    if seq.is_empty() || seq.len() > MAX_SEQ_LEN || seq.chars().any(char::is_control) {
        return Err(Error::Config(format!(
            "--void-truncate: give the truncate's `__seq` as bronze holds it (at most \
             {MAX_SEQ_LEN} characters, one line)"
        )));
    }
    // A `__seq` copied from silver or an error carries its reset rank: bronze's has none.
    let seq = crate::refine::cdc::positions::unranked(seq);
    if !truncate_in(ctx, &apply.source, seq).await? {
        return Err(Error::Config(format!(
            "--void-truncate: bronze `{}` holds no truncate (`__op` = t) at `__seq` `{seq}`; \
             nothing was changed (list them with `lakestream sql \"SELECT __seq, __source_ts \
             FROM ... WHERE __op = 't'\"` or `lakestream show`)",
            apply.source
        )));
    }
    reset(ctx, cfg, Some(seq)).await?.ok_or_else(|| {
        Error::Config(format!(
            "refine job `{}`: its output `{}` does not exist yet, so there is no truncate to \
             void",
            cfg.job, cfg.output
        ))
    })
}

/// Whether bronze table `source` holds a truncate at `seq` (its `__op` and `__seq` columns
/// read, file by file).
async fn truncate_in(ctx: &RunContext<'_>, source: &str, seq: &str) -> Result<bool> {
    use deltalake::arrow::array::{Array, AsArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};
    use lakestream_formats::config::bronze;
    let h = ctx.load_source(source).await?;
    if !h.exists() {
        return Ok(false);
    }
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new(bronze::OP, DataType::Utf8, true),
        Field::new(bronze::SEQ, DataType::Utf8, true),
    ]));
    for file in h.live_files()? {
        for b in h.read_columns(&file.data_file(), &schema).await? {
            let (Some(op), Some(s)) = (
                b.column(0).as_string_opt::<i32>(),
                b.column(1).as_string_opt::<i32>(),
            ) else {
                continue;
            };
            let hit = (0..b.num_rows()).any(|i| {
                op.is_valid(i)
                    && op.value(i) == bronze::OP_TRUNCATE
                    && s.is_valid(i)
                    && s.value(i) == seq
            });
            if hit {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The voided truncates' `__seq`s an output records.
pub(crate) fn voided_truncates(output: &TableHandle) -> Result<Vec<String>> {
    if !output.exists() {
        return Ok(vec![]);
    }
    Ok(output
        .property(silver::VOID_TRUNCATES_PROPERTY)?
        .map(|v| v.lines().map(str::to_string).collect())
        .unwrap_or_default())
}

async fn reset(ctx: &RunContext<'_>, cfg: &RefineJob, void: Option<&str>) -> Result<Option<u64>> {
    if let JobKind::Join(_) = cfg.kind {
        return Err(Error::Config(format!(
            "refine job `{}`: --rebuild is not supported for interval joins (their side state \
             lives beside the output); delete the output and its `_lakestream/{}` state and run \
             the job again",
            cfg.job, cfg.job
        )));
    }
    let mut output = TableHandle::open(ctx.lake, &cfg.output)?;
    output.refresh().await?;
    if !output.exists() {
        return Ok(None);
    }
    // At least what the output consumed: a snapshot this invocation loaded before another
    // instance's apply is older, and the runs after the reset would rebuild silver from it
    // (silver going back, the versions between found already read).
    let app_ids: Vec<String> = cfg
        .sources()
        .iter()
        .map(|t| ctx.app_id(&cfg.job, t))
        .collect();
    let consumed = output.committed(&app_ids).await?;
    let mut sources = Vec::new();
    for table in cfg.sources() {
        let at_least = consumed
            .get(&ctx.app_id(&cfg.job, table))
            .and_then(|v| u64::try_from(*v).ok());
        let h = ctx.load_source_at_least(table, at_least).await?;
        let id = if h.exists() {
            Some(h.table_id()?)
        } else {
            None
        };
        sources.push((table.to_string(), id));
    }
    if let JobKind::Cdc(apply) = &cfg.kind {
        // The run after the reset reads bronze's snapshot (the one just loaded): refused now,
        // not after emptying.
        crate::refine::snapshot_limit::check_snapshot_fits(ctx, cfg, &apply.source).await?;
    }
    let mut planner = ResetPlanner {
        app_ids,
        sources,
        // A CDC job's silver is rebuilt under its current `position_resets`: recorded in the
        // reset commit, so a run that fails after it does not rebuild again and again.
        properties: match &cfg.kind {
            JobKind::Cdc(apply) => vec![(
                crate::refine::cdc::positions::RESETS_PROPERTY.to_string(),
                crate::refine::cdc::positions::resets_text(&apply.position_resets),
            )],
            _ => vec![],
        },
        void: void.map(str::to_string),
    };
    Ok(commit::run(&mut output, ctx.settings, &mut planner)
        .await?
        .landed
        .map(|l| l.version))
}

/// Removes every live file and marks every source unread.
struct ResetPlanner {
    /// The `txn` appId of each source, in `sources` order.
    app_ids: Vec<String>,
    /// Each source and its current table id (`None`: it does not exist now).
    sources: Vec<(String, Option<String>)>,
    /// Further properties the reset commit sets.
    properties: Vec<(String, String)>,
    /// A truncate `__seq` to add to the voided ones.
    void: Option<String>,
}

impl ChangePlanner for ResetPlanner {
    async fn plan(&mut self, output: &TableHandle, state: &TableState) -> Result<Option<Proposal>> {
        let Some(schema) = state.schema.clone() else {
            return Ok(None);
        };
        let removes = output
            .live_files()?
            .iter()
            .map(|f| f.remove_action(true))
            .collect();
        let txns = self
            .app_ids
            .iter()
            .map(|app| Transaction::new(app.clone(), -1))
            .collect();
        let mut change = commit::Change::append(
            state.version,
            DeltaOperation::Delete { predicate: None },
            vec![],
            txns,
        );
        change.removes = removes;
        change.scope = ReadScope::Table;
        change.properties = self
            .sources
            .iter()
            .filter_map(|(t, id)| Some((source_id_property(t), id.clone()?)))
            .chain(self.properties.iter().cloned())
            .collect();
        if let Some(seq) = &self.void {
            let mut voided = voided_truncates(output)?;
            if !voided.contains(seq) {
                voided.push(seq.clone());
            }
            let v = voided.join("\n");
            change
                .properties
                .push((silver::VOID_TRUNCATES_PROPERTY.to_string(), v));
            // The silver's record of its newest truncate may be the voided one: cleared (empty),
            // the rebuilding run records the newest truncate still standing.
            for p in [silver::TRUNCATED_AT_PROPERTY, TRUNCATED_AT_TIME_PROPERTY] {
                change.properties.push((p.to_string(), String::new()));
            }
        }
        Ok(Some(Proposal {
            change,
            schema,
            create: None,
        }))
    }
}
