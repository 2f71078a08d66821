//! The dead-letter side of an invocation: one record as a dead letter, committing letters and
//! settling their records, and dead-lettering a whole batch the pipeline cannot ingest.

use super::{IngestReport, Ingestor, RecordState};
use crate::deadletter::{DeadLetter, write_dead_letters};
use crate::error::Result;
use crate::record::{RecordValue, SourceRecord};
use chrono::{DateTime, Utc};
use std::collections::HashSet;

impl Ingestor {
    /// Put every record of `records` in the dead-letter table with `reason` (a batch the
    /// pipeline cannot ingest for good). Records found already committed there are reported
    /// as duplicates; idempotent per record like every dead letter.
    pub async fn dead_letter_batch(
        &self,
        records: &[SourceRecord],
        reason: &str,
    ) -> Result<IngestReport> {
        let now = self.clock.now();
        let mut states = vec![RecordState::Pending; records.len()];
        let mut report = IngestReport {
            received: records.len(),
            bytes_received: records.iter().map(SourceRecord::value_len).sum(),
            ..Default::default()
        };
        let mut seen = HashSet::new();
        let mut letters = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if !seen.insert((r.topic.as_str(), r.partition, r.offset)) {
                states[i] = RecordState::RepeatedInBatch;
                continue;
            }
            let table = self.layouts.get(&r.topic).map(|l| l.table.as_str());
            letters.push((i, letter(r, table, reason.to_string())));
        }
        self.dead_letter(letters, &mut states, &mut report, now)
            .await?;
        report.count(&states);
        Ok(report)
    }

    /// Commit `letters` to the dead-letter table and settle their records: `DeadLettered` when
    /// written now, `AlreadyCommitted` when an earlier delivery wrote them.
    pub(super) async fn dead_letter(
        &self,
        letters: Vec<(usize, DeadLetter)>,
        states: &mut [RecordState],
        report: &mut IngestReport,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        let only: Vec<DeadLetter> = letters.iter().map(|l| l.1.clone()).collect();
        for l in &only {
            // The reason quotes the value: only its class is logged (the dead-letter table has both).
            tracing::warn!(topic = ?l.topic, partition = ?l.partition, offset = ?l.offset, reason = crate::redact::reason_class(&l.error), "dead-lettered record");
        }
        let mut handle = self
            .handles
            .take(&self.lake, &self.config.dead_letter_table)
            .await?;
        let out = write_dead_letters(
            &self.lake,
            &mut handle,
            &self.config.pipeline,
            &self.settings,
            &only,
            now,
        )
        .await;
        self.handles.put(handle);
        let out = out?;
        for ((i, _), written) in letters.iter().zip(out.written) {
            states[*i] = if written {
                RecordState::DeadLettered
            } else {
                RecordState::AlreadyCommitted
            };
        }
        if out.commit.version.is_some() {
            report.dead_letter_version = out.commit.version;
        }
        Ok(())
    }
}

pub(super) fn letter(r: &SourceRecord, table: Option<&str>, error: String) -> DeadLetter {
    let raw_base64 = match &r.value {
        RecordValue::Bytes(b) => Some(DeadLetter::encode_raw(b)),
        RecordValue::Invalid { raw, .. } => Some(raw.clone()),
        RecordValue::Null => None,
    };
    DeadLetter {
        topic: Some(r.topic.clone()),
        partition: Some(r.partition),
        offset: Some(r.offset),
        kafka_timestamp_ms: r.timestamp_ms,
        object_uri: None,
        line_number: None,
        raw_base64,
        error,
        target_table: table.map(str::to_string),
        txn: None,
    }
}
