//! The Kafka ingestor's side of the dead-letter table: committing a batch's letters and
//! settling their records, and dead-lettering a whole batch the pipeline cannot ingest.

use super::ingestor::KafkaIngestor;
use super::report::{IngestReport, RecordOutcome};
use crate::dead_letter::{DeadLetter, write_dead_letters};
use crate::error::Result;
use chrono::{DateTime, Utc};
use lakestream_formats::record::SourceRecord;
use std::collections::HashSet;

impl KafkaIngestor {
    /// Put every record of `records` in the dead-letter table with `reason` (a batch the
    /// pipeline cannot ingest for good). Records found already committed there are reported
    /// as duplicates; idempotent per record like every dead letter.
    pub async fn dead_letter_batch(
        &self,
        records: &[SourceRecord],
        reason: &str,
    ) -> Result<IngestReport> {
        let now = self.clock.now();
        let mut outcomes = vec![RecordOutcome::Pending; records.len()];
        let mut report = IngestReport {
            received: records.len(),
            bytes_received: records.iter().map(SourceRecord::value_len).sum(),
            ..Default::default()
        };
        let mut seen = HashSet::new();
        let mut letters = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if !seen.insert((r.topic.as_str(), r.partition, r.offset)) {
                outcomes[i] = RecordOutcome::RepeatedInBatch;
                continue;
            }
            let table = self.table_of(&r.topic);
            letters.push((
                i,
                DeadLetter::kafka(r, table.as_deref(), reason.to_string()),
            ));
        }
        self.dead_letter(letters, &mut outcomes, &mut report, now)
            .await?;
        report.count(&outcomes);
        Ok(report)
    }

    /// Commit `letters` to the dead-letter table and settle their records: `DeadLettered` when
    /// written now, `AlreadyCommitted` when an earlier delivery wrote them.
    pub(super) async fn dead_letter(
        &self,
        letters: Vec<(usize, DeadLetter)>,
        outcomes: &mut [RecordOutcome],
        report: &mut IngestReport,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if letters.is_empty() {
            return Ok(());
        }
        let only: Vec<DeadLetter> = letters.iter().map(|l| l.1.clone()).collect();
        for l in &only {
            // The reason quotes the value: only its class is logged (the dead-letter table has both).
            tracing::warn!(topic = ?l.topic(), partition = ?l.partition(), offset = ?l.offset(), reason = crate::redact::reason_class(&l.reason), "dead-lettered record");
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
            outcomes[*i] = if written {
                RecordOutcome::DeadLettered
            } else {
                RecordOutcome::AlreadyCommitted
            };
        }
        if out.commit.version.is_some() {
            report.dead_letter_version = out.commit.version;
        }
        Ok(())
    }
}
