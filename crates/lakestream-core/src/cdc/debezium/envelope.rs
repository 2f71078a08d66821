//! One Debezium record (key and value bytes) -> a [`Change`]: the JSON converter's
//! `{schema, payload}` wrapper taken off (when `schemas.enable=true`), the op, the source
//! position that orders the change (ARCHITECTURE.md "The ordering rule"), the commit time, the
//! record key as compact JSON, and the row image's cells.

use super::types::{Typed, shape, typed, untyped};
use lakestream_formats::config::{CdcColumn, bronze};
use serde_json::{Map, Value};

/// A decoded change event, before it meets the table's schema.
#[derive(Debug)]
pub(super) struct Change {
    /// `__op`: one of the `bronze::OP_*` letters.
    pub op: &'static str,
    /// `__seq`: the source position ([`position`]); `<position>|<Kafka offset, 20 digits>`
    /// where the position does not name one change (Oracle `scn`, the `ts_ms` fallback).
    pub seq: String,
    /// `__source_ts`: `source.ts_ms` in µs.
    pub source_ts: Option<i64>,
    /// `__key`: the record key's payload as compact JSON (object keys sorted).
    pub key: Option<String>,
    /// The key's field names (the key schema's order when wrapped).
    pub key_fields: Vec<String>,
    /// Where `key_fields` came from: [`KEYS_FROM_SCHEMA`] or [`KEYS_FROM_PAYLOAD`] (empty
    /// without a key).
    pub keys_from: &'static str,
    /// Which source field ordered the change (`commit_lsn`, `file`, `lsn`, `scn`, `ts_ms`;
    /// empty for a tombstone): one topic's changes must all have the same kind to compare.
    pub position_kind: &'static str,
    /// The row image (`after`; `before` for a delete; empty for a truncate), in the schema's
    /// field order when wrapped, else by name.
    pub row: Vec<(String, Typed)>,
}

/// `(schema, payload)` of a JSON converter message when it is wrapped, else `(None, message)`.
fn unwrap(v: Value) -> (Option<Value>, Value) {
    match v {
        Value::Object(mut m)
            if m.len() == 2 && m.contains_key("schema") && m.contains_key("payload") =>
        {
            let payload = m.remove("payload").unwrap_or(Value::Null);
            let schema = m.remove("schema").filter(|s| !s.is_null());
            (schema, payload)
        }
        other => (None, other),
    }
}

/// Decode one record. `Err` is the reason it is dead-lettered.
pub(super) fn parse(
    key: Option<&[u8]>,
    value: &[u8],
    offset: i64,
    declared: &[CdcColumn],
) -> Result<Change, String> {
    let v: Value = serde_json::from_slice(value)
        .map_err(|e| format!("value is not JSON ({e}); Debezium topics need the JSON converter"))?;
    let (schema, payload) = unwrap(v);
    let Value::Object(envelope) = payload else {
        return Err("value is not a Debezium change event (not a JSON object)".into());
    };
    let op = match envelope.get("op").and_then(Value::as_str) {
        Some("c") => bronze::OP_INSERT,
        Some("u") => bronze::OP_UPDATE,
        Some("d") => bronze::OP_DELETE,
        Some("r") => bronze::OP_SNAPSHOT,
        Some("t") => bronze::OP_TRUNCATE,
        Some(other) => {
            return Err(format!(
                "`op` ({}) is not a Debezium row change (c, u, d, r or t)",
                shape(&Value::String(other.to_string()))
            ));
        }
        None => {
            return Err(
                "value is not a Debezium change event: no `op` (a schema change or heartbeat \
                 topic, or an unwrapping SMT such as ExtractNewRecordState?)"
                    .into(),
            );
        }
    };
    let source = match envelope.get("source") {
        Some(Value::Object(s)) => s,
        _ => return Err("the change event has no `source` block".into()),
    };
    let (position, names_one_change, position_kind) = position(source)?;
    if offset < 0 {
        return Err(format!("Kafka offset {offset} is negative"));
    }
    let source_ts = match source.get("ts_ms") {
        None | Some(Value::Null) => None,
        Some(t) => {
            let ms = t
                .as_i64()
                .ok_or_else(|| format!("source.ts_ms is not an integer ({})", shape(t)))?;
            let us = ms
                .checked_mul(1000)
                .ok_or_else(|| "source.ts_ms is out of range".to_string())?;
            if let Some(why) = crate::timestamp::out_of_range(us, &ms.to_string()) {
                return Err(format!("source.ts_ms: {why}"));
            }
            Some(us)
        }
    };
    let image = match op {
        o if o == bronze::OP_TRUNCATE => None,
        o if o == bronze::OP_DELETE => Some("before"),
        _ => Some("after"),
    };
    let row = match image {
        None => vec![],
        Some(which) => match envelope.get(which) {
            Some(Value::Object(row)) => cells(row, field_schema(schema.as_ref(), which), declared)?,
            // A delete without a before image (PostgreSQL REPLICA IDENTITY NOTHING): the key
            // still says which row went.
            None | Some(Value::Null) if op == bronze::OP_DELETE => vec![],
            _ => {
                return Err(format!(
                    "op {op:?} has no `{which}` row image (a JSON object)"
                ));
            }
        },
    };
    let (key, key_fields, keys_from) = match key {
        None => (None, vec![], ""),
        Some(bytes) => record_key(bytes)?,
    };
    Ok(Change {
        op,
        // A connector restart re-emits changes at new Kafka offsets with their source position:
        // where the position names one change, it alone is the change's identity, so the
        // re-emission is the same change (ARCHITECTURE.md "The ordering rule").
        seq: if names_one_change {
            position
        } else {
            format!("{position}|{offset:020}")
        },
        source_ts,
        key,
        key_fields,
        keys_from,
        position_kind,
        row,
    })
}

/// Whether `value` is a Debezium delete event (`op` `d`, wrapped or not).
pub(super) fn is_delete(value: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(value) else {
        return false;
    };
    let (_, payload) = unwrap(v);
    payload.get("op").and_then(Value::as_str) == Some("d")
}

/// A tombstone (a null value; its key names the row) whose delete event is not just before it
/// in its partition (log compaction removed it, or it came in an earlier batch): a delete with
/// no source position (`__seq` empty), its row the key's fields, its time the Kafka record's
/// (`timestamp_ms`: when the connector sent it, just after the delete committed). The apply
/// places it after every change of its key before it in the partition (ARCHITECTURE.md
/// "Deletes known only from their tombstone").
pub(super) fn tombstone(
    key: &[u8],
    timestamp_ms: Option<i64>,
    declared: &[CdcColumn],
) -> Result<Change, String> {
    let v: Value = serde_json::from_slice(key).map_err(|e| {
        format!("record key is not JSON ({e}); Debezium topics need key.converter=JsonConverter")
    })?;
    let (schema, payload) = unwrap(v);
    let Value::Object(fields) = &payload else {
        return Err("a tombstone's key is not a JSON object of key columns".into());
    };
    let row = cells(fields, schema.as_ref(), declared)?;
    let (key, key_fields, keys_from) = record_key(key)?;
    // A timestamp out of range is no time (the apply then uses the ingest time).
    let source_ts = timestamp_ms
        .and_then(|ms| ms.checked_mul(1000))
        .filter(|us| crate::timestamp::out_of_range(*us, "").is_none());
    Ok(Change {
        op: bronze::OP_DELETE,
        seq: String::new(),
        source_ts,
        key,
        key_fields,
        keys_from,
        position_kind: "",
        row,
    })
}

/// The schema of envelope field `name` (`before` / `after`), when the value is wrapped.
fn field_schema<'a>(schema: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    schema?
        .get("fields")?
        .as_array()?
        .iter()
        .find(|f| f.get("field").and_then(Value::as_str) == Some(name))
}

/// The row image's cells: typed by the image's schema when there is one, else by the declared
/// columns, else from the JSON values.
fn cells(
    row: &Map<String, Value>,
    schema: Option<&Value>,
    declared: &[CdcColumn],
) -> Result<Vec<(String, Typed)>, String> {
    let fields = schema
        .and_then(|s| s.get("fields"))
        .and_then(Value::as_array);
    let Some(fields) = fields else {
        return row
            .iter()
            .map(|(name, v)| {
                let d = declared.iter().find(|c| c.name.eq_ignore_ascii_case(name));
                let t = untyped(v, d.map(|c| c.data_type))
                    .map_err(|e| format!("column `{name}`: {e}"))?;
                Ok((name.clone(), t))
            })
            .collect();
    };
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let Some(name) = f.get("field").and_then(Value::as_str) else {
            return Err("a row schema field has no name (`field`)".into());
        };
        let v = row.get(name).unwrap_or(&Value::Null);
        let t = typed(v, f).map_err(|e| format!("column `{name}`: {e}"))?;
        out.push((name.to_string(), t));
    }
    Ok(out)
}

/// `lakestream.cdc.keys_from` of keys named by a wrapped record key's schema (Debezium's key
/// schema: the source table's primary key).
pub const KEYS_FROM_SCHEMA: &str = "key-schema";
/// `lakestream.cdc.keys_from` of keys read off an unwrapped record key's payload fields.
pub const KEYS_FROM_PAYLOAD: &str = "key-payload";

/// The record key: compact JSON of its payload, its field names and where they came from.
fn record_key(bytes: &[u8]) -> Result<(Option<String>, Vec<String>, &'static str), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        format!("record key is not JSON ({e}); Debezium topics need key.converter=JsonConverter")
    })?;
    let (schema, payload) = unwrap(v);
    if payload.is_null() {
        return Ok((None, vec![], ""));
    }
    let fields: Vec<String> = match (
        schema
            .as_ref()
            .and_then(|s| s.get("fields"))
            .and_then(Value::as_array),
        &payload,
    ) {
        (Some(fs), _) => fs
            .iter()
            .filter_map(|f| f.get("field").and_then(Value::as_str).map(str::to_string))
            .collect(),
        (None, Value::Object(m)) => m.keys().cloned().collect(),
        (None, _) => vec![],
    };
    let from = match schema.as_ref().and_then(|s| s.get("fields")) {
        Some(_) => KEYS_FROM_SCHEMA,
        None => KEYS_FROM_PAYLOAD,
    };
    Ok((Some(payload.to_string()), fields, from))
}

/// A non-negative integer (JSON number or numeric text) of the source block, at most
/// `i64::MAX`: Debezium's source fields are `int64` (PostgreSQL's `lsn`, MySQL's `pos`, the
/// serial numbers; Oracle's `scn` text is smaller still), so a larger one (`lsn` =
/// 18446744073709551615, which would outrank and, on a truncate, void every later change) is
/// not one. Errors name the field and the JSON type, never the value.
fn number(source: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    let n = match source.get(name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(other) => {
            return Err(format!(
                "source.{name} is not an integer ({})",
                shape(other)
            ));
        }
    };
    n.filter(|n| i64::try_from(*n).is_ok())
        .map(Some)
        .ok_or_else(|| {
            format!("source.{name} is not a non-negative 64-bit integer (Debezium's `int64`)")
        })
}

/// SQL Server's LSN as Debezium sends it: `00000027:00000db0:0007` (8, 8 and 4 hex digits).
fn sql_server_lsn(lsn: &str) -> bool {
    let groups: Vec<&str> = lsn.split(':').collect();
    groups.len() == 3
        && groups
            .iter()
            .zip([8, 8, 4])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn text<'a>(source: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    source.get(name).and_then(Value::as_str)
}

/// The change's source position, fixed width so that text order is change order: SQL Server
/// `commit_lsn.change_lsn.event_serial_no`, MySQL `file number.pos.row`, PostgreSQL `lsn`,
/// Oracle `scn`, else `ts_ms`; and whether it names exactly one change of a row (the first
/// three do; an SCN can be shared by changes of one transaction, a `ts_ms` by any two).
pub(super) fn position(
    source: &Map<String, Value>,
) -> Result<(String, bool, &'static str), String> {
    if let Some(commit) = text(source, "commit_lsn") {
        // Ordering values come from the record: only SQL Server's LSN shape is accepted, so a
        // forged `~` (above every hex digit) cannot outrank, or void, every later change.
        for (name, lsn) in [
            ("commit_lsn", Some(commit)),
            ("change_lsn", text(source, "change_lsn")),
        ] {
            if lsn.is_some_and(|l| !sql_server_lsn(l)) {
                return Err(format!(
                    "source.{name} is not a SQL Server LSN (`xxxxxxxx:xxxxxxxx:xxxx`, hex)"
                ));
            }
        }
        // LSNs are sent as fixed-width hex (`00000027:00000db0:0007`); a snapshot row has no
        // change_lsn: zeros of the same shape sort it first within its commit.
        let zeros: String = commit
            .chars()
            .map(|c| if c == ':' { ':' } else { '0' })
            .collect();
        let change = text(source, "change_lsn").unwrap_or(&zeros);
        let serial = number(source, "event_serial_no")?.unwrap_or(0);
        return Ok((
            format!("{commit}.{change}.{serial:020}"),
            true,
            "commit_lsn",
        ));
    }
    if let Some(file) = text(source, "file") {
        // `mysql-bin.000003`: the number after the last `.` orders the binlog files.
        let n = file
            .rsplit_once('.')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .filter(|n| *n < 10_000_000_000)
            .ok_or("source.file has no binlog file number (`mysql-bin.000003`)")?;
        let pos = number(source, "pos")?.ok_or("source.file without source.pos")?;
        // `row` is an `int32`: ten digits keep the position's text order.
        let row = number(source, "row")?.unwrap_or(0);
        if row >= 10_000_000_000 {
            return Err("source.row is not a row number of a binlog event (`int32`)".into());
        }
        return Ok((format!("{n:010}.{pos:020}.{row:010}"), true, "file"));
    }
    for name in ["lsn", "scn", "ts_ms"] {
        if let Some(n) = number(source, name)? {
            return Ok((format!("{n:020}"), name == "lsn", name));
        }
    }
    Err(
        "the source block has no position (lsn, file/pos, commit_lsn, scn) and no ts_ms, so the \
         change cannot be ordered"
            .into(),
    )
}
