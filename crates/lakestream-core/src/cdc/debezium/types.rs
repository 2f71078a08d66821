//! Debezium column values -> typed cells. With the JSON converter's schema, the Kafka Connect
//! type and Debezium's semantic type (`name`) decide; without it, the family's declared column
//! type, else the JSON value itself.
//!
//! | schema (`name`, else `type`) | column type |
//! |---|---|
//! | `io.debezium.time.Date`, `org.apache.kafka.connect.data.Date` (days) | date |
//! | `io.debezium.time.Timestamp` / `MicroTimestamp` / `NanoTimestamp`, `org.apache.kafka.connect.data.Timestamp` (ms) | timestamp µs UTC |
//! | `io.debezium.time.ZonedTimestamp` (ISO-8601 text) | timestamp µs UTC |
//! | `io.debezium.time.Time` / `MicroTime` / `NanoTime`, `org.apache.kafka.connect.data.Time` | int64, µs since midnight (Delta has no time type) |
//! | `org.apache.kafka.connect.data.Decimal` (base64 unscaled, `scale`, `connect.decimal.precision`) | decimal(p, s), p = 38 when not sent |
//! | `io.debezium.data.VariableScaleDecimal` | refused: set `decimal.handling.mode` to `string` or `double` |
//! | `io.debezium.data.Json`, `struct`, `array`, `map` | string (JSON text) |
//! | `bytes` | binary |
//! | `int8`/`int16`/`int32`, `int64`, `float32`/`float64`, `boolean`, `string` | int32, int64, float64, boolean, string |

use base64::Engine as _;
use deltalake::arrow::datatypes::DataType;
use lakestream_formats::config::CdcType;
use serde_json::Value;

/// One decoded value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    /// Days since the epoch.
    Date(i32),
    /// Microseconds since the epoch, UTC.
    Micros(i64),
    /// An unscaled integer and its scale.
    Decimal(i128, i8),
}

/// A cell and the column type it asks for when its column is new (`None`: no type known, e.g.
/// a null without a schema).
pub(super) type Typed = (Option<DataType>, Cell);

fn ts() -> DataType {
    crate::schema::timestamp_type()
}

/// What `v` is, for a reason that must not quote it (no record value in a dead letter's
/// reason or a log line: the column and the types only).
pub(super) fn shape(v: &Value) -> String {
    match v {
        Value::String(s) => format!("a JSON string of {} characters", s.chars().count()),
        Value::Number(_) => "a JSON number".into(),
        Value::Bool(_) => "a JSON boolean".into(),
        Value::Null => "null".into(),
        Value::Array(a) => format!("a JSON array of {} items", a.len()),
        Value::Object(o) => format!("a JSON object of {} fields", o.len()),
    }
}

/// What text `t` is, without quoting it.
fn text_shape(t: &str) -> String {
    format!("a text of {} characters", t.chars().count())
}

fn int(v: &Value) -> Result<i64, String> {
    v.as_i64()
        .ok_or_else(|| format!("{} is not an integer", shape(v)))
}

fn micros(us: Option<i64>, raw: &Value) -> Result<Cell, String> {
    let us = us.ok_or_else(|| format!("{} is out of range", shape(raw)))?;
    match crate::timestamp::out_of_range(us, &raw.to_string()) {
        Some(why) => Err(why),
        None => Ok(Cell::Micros(us)),
    }
}

fn base64(v: &Value) -> Result<Vec<u8>, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{} is not base64 text", shape(v)))?;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|_| format!("{} is not base64", text_shape(s)))
}

/// A value typed by its Kafka Connect field schema.
pub(super) fn typed(v: &Value, schema: &Value) -> Result<Typed, String> {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let name = schema.get("name").and_then(Value::as_str).unwrap_or("");
    let dt = match name {
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => DataType::Date32,
        "io.debezium.time.Timestamp"
        | "io.debezium.time.MicroTimestamp"
        | "io.debezium.time.NanoTimestamp"
        | "io.debezium.time.ZonedTimestamp"
        | "org.apache.kafka.connect.data.Timestamp" => ts(),
        "io.debezium.time.Time"
        | "io.debezium.time.MicroTime"
        | "io.debezium.time.NanoTime"
        | "org.apache.kafka.connect.data.Time" => DataType::Int64,
        "org.apache.kafka.connect.data.Decimal" => decimal_type(schema)?,
        "io.debezium.data.VariableScaleDecimal" => {
            return Err("a NUMERIC/DECIMAL without a fixed scale arrives as \
                        io.debezium.data.VariableScaleDecimal, which has no column type: set \
                        decimal.handling.mode=string (exact) or double on the connector"
                .into());
        }
        _ => match kind {
            "int8" | "int16" | "int32" => DataType::Int32,
            "int64" => DataType::Int64,
            "float32" | "float64" => DataType::Float64,
            "boolean" => DataType::Boolean,
            "string" => DataType::Utf8,
            "bytes" => DataType::Binary,
            "struct" | "array" | "map" => DataType::Utf8,
            other => return Err(format!("Kafka Connect type {other:?} is not supported")),
        },
    };
    if v.is_null() {
        return Ok((Some(dt), Cell::Null));
    }
    let cell = match (name, &dt) {
        (_, DataType::Date32) => Cell::Date(
            i32::try_from(int(v)?).map_err(|_| format!("{} is out of range as days", shape(v)))?,
        ),
        ("io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp", _) => {
            micros(int(v)?.checked_mul(1000), v)?
        }
        ("io.debezium.time.MicroTimestamp", _) => micros(Some(int(v)?), v)?,
        ("io.debezium.time.NanoTimestamp", _) => micros(Some(int(v)?.div_euclid(1000)), v)?,
        ("io.debezium.time.ZonedTimestamp", _) => {
            let s = v
                .as_str()
                .ok_or_else(|| format!("{} is not ISO-8601 text", shape(v)))?;
            let t = chrono::DateTime::parse_from_rfc3339(s)
                .map_err(|_| format!("{} is not an ISO-8601 timestamp", text_shape(s)))?;
            micros(Some(t.timestamp_micros()), v)?
        }
        ("io.debezium.time.Time" | "org.apache.kafka.connect.data.Time", _) => Cell::Int(
            int(v)?
                .checked_mul(1000)
                .ok_or_else(|| format!("{} is out of range as milliseconds", shape(v)))?,
        ),
        ("io.debezium.time.MicroTime", _) => Cell::Int(int(v)?),
        ("io.debezium.time.NanoTime", _) => Cell::Int(int(v)?.div_euclid(1000)),
        (_, DataType::Decimal128(_, s)) => Cell::Decimal(unscaled(&base64(v)?)?, *s),
        (_, DataType::Int32 | DataType::Int64) => Cell::Int(int(v)?),
        (_, DataType::Float64) => Cell::Float(
            v.as_f64()
                .ok_or_else(|| format!("{} is not a number", shape(v)))?,
        ),
        (_, DataType::Boolean) => Cell::Bool(
            v.as_bool()
                .ok_or_else(|| format!("{} is not a boolean", shape(v)))?,
        ),
        (_, DataType::Binary) => Cell::Bytes(base64(v)?),
        _ => json_text(v),
    };
    Ok((Some(dt), cell))
}

/// Strings as they are; anything else as compact JSON.
fn json_text(v: &Value) -> Cell {
    match v {
        Value::String(s) => Cell::Text(s.clone()),
        other => Cell::Text(other.to_string()),
    }
}

/// `decimal(p, s)` of a Connect `Decimal` schema: `scale` and the optional
/// `connect.decimal.precision` are in its `parameters` (as text).
fn decimal_type(schema: &Value) -> Result<DataType, String> {
    let param = |k: &str| {
        schema
            .get("parameters")
            .and_then(|p| p.get(k))
            .and_then(|v| match v {
                Value::String(s) => s.trim().parse::<i64>().ok(),
                other => other.as_i64(),
            })
    };
    let scale = param("scale").ok_or("a Decimal schema without a `scale` parameter")?;
    let precision = param("connect.decimal.precision").unwrap_or(38);
    match (u8::try_from(precision), i8::try_from(scale)) {
        (Ok(p), Ok(s)) if (1..=38).contains(&p) && s >= 0 && s as u8 <= p => {
            Ok(DataType::Decimal128(p, s))
        }
        _ => Err(format!(
            "decimal({precision},{scale}) does not fit a Delta decimal (precision 1..=38, \
             0 <= scale <= precision): set decimal.handling.mode=string on the connector"
        )),
    }
}

/// The big-endian two's-complement integer of a Connect `Decimal`.
fn unscaled(bytes: &[u8]) -> Result<i128, String> {
    if bytes.is_empty() || bytes.len() > 16 {
        return Err(format!(
            "a {}-byte unscaled decimal does not fit 38 digits",
            bytes.len()
        ));
    }
    let fill = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut buf = [fill; 16];
    for (to, from) in buf.iter_mut().rev().zip(bytes.iter().rev()) {
        *to = *from;
    }
    Ok(i128::from_be_bytes(buf))
}

/// A value without a schema: the declared type when there is one, else from the JSON value
/// (integer -> int64, other numbers -> float64, objects and arrays -> JSON text).
pub(super) fn untyped(v: &Value, declared: Option<CdcType>) -> Result<Typed, String> {
    let Some(d) = declared else {
        return Ok(match v {
            Value::Null => (None, Cell::Null),
            Value::Bool(b) => (Some(DataType::Boolean), Cell::Bool(*b)),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => (Some(DataType::Int64), Cell::Int(i)),
                // An unsigned 64-bit value past int64 (MySQL `BIGINT UNSIGNED`): exact, as
                // decimal(20,0), never a float that merges neighbouring keys.
                (None, Some(u)) => (
                    Some(DataType::Decimal128(20, 0)),
                    Cell::Decimal(i128::from(u), 0),
                ),
                (None, None) => (
                    Some(DataType::Float64),
                    Cell::Float(n.as_f64().unwrap_or(f64::NAN)),
                ),
            },
            other => (Some(DataType::Utf8), json_text(other)),
        });
    };
    let dt = match d {
        CdcType::String => DataType::Utf8,
        CdcType::Int32 => DataType::Int32,
        CdcType::Int64 => DataType::Int64,
        CdcType::Float64 => DataType::Float64,
        CdcType::Boolean => DataType::Boolean,
        CdcType::Timestamp => ts(),
        CdcType::Date => DataType::Date32,
        CdcType::Decimal(p, s) => DataType::Decimal128(p, s),
        CdcType::Binary => DataType::Binary,
    };
    if v.is_null() {
        return Ok((Some(dt), Cell::Null));
    }
    let cell = match d {
        CdcType::String => json_text(v),
        CdcType::Int32 | CdcType::Int64 => Cell::Int(int(v)?),
        CdcType::Float64 => Cell::Float(
            v.as_f64()
                .ok_or_else(|| format!("{} is not a number", shape(v)))?,
        ),
        CdcType::Boolean => Cell::Bool(
            v.as_bool()
                .ok_or_else(|| format!("{} is not a boolean", shape(v)))?,
        ),
        // Numbers are epoch milliseconds (the connector's time.precision.mode=connect).
        CdcType::Timestamp => match v {
            Value::Number(_) => micros(int(v)?.checked_mul(1000), v)?,
            Value::String(s) => micros(crate::timestamp::parse_timestamp_micros(s), v)?,
            _ => {
                return Err(format!(
                    "{} is not a timestamp (ISO-8601 text or epoch ms)",
                    shape(v)
                ));
            }
        },
        CdcType::Date => match v {
            Value::Number(_) => Cell::Date(
                i32::try_from(int(v)?)
                    .map_err(|_| format!("{} is out of range as days", shape(v)))?,
            ),
            Value::String(s) => {
                let d = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                    .map_err(|_| format!("{} is not a YYYY-MM-DD date", text_shape(s)))?;
                Cell::Date((d - chrono::NaiveDate::default()).num_days() as i32)
            }
            _ => {
                return Err(format!(
                    "{} is not a date (YYYY-MM-DD or epoch days)",
                    shape(v)
                ));
            }
        },
        CdcType::Decimal(p, s) => {
            let text = match v {
                Value::String(t) => t.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(format!("{} is not a decimal", shape(v))),
            };
            Cell::Decimal(parse_decimal(&text, p, s)?, s)
        }
        CdcType::Binary => Cell::Bytes(base64(v)?),
    };
    Ok((Some(dt), cell))
}

/// Decimal text (`-123.45`) as an unscaled integer of scale `s` and at most `p` digits.
pub(super) fn parse_decimal(text: &str, p: u8, s: i8) -> Result<i128, String> {
    let t = text.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let ok = !(whole.is_empty() && frac.is_empty())
        && whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit());
    if !ok {
        let base64ish = !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        return Err(if base64ish {
            format!(
                "{} looks like a base64 decimal (decimal.handling.mode=precise): without \
                 schemas the connector must send decimals as text, set \
                 decimal.handling.mode=string",
                text_shape(t)
            )
        } else {
            format!(
                "{} is not a decimal number (decimal.handling.mode=string sends e.g. \"12.50\")",
                text_shape(t)
            )
        });
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > s as usize {
        return Err(format!(
            "{} has more than {s} decimal places",
            text_shape(t)
        ));
    }
    let mut n: i128 = 0;
    let padded = frac
        .bytes()
        .chain(std::iter::repeat_n(b'0', s as usize - frac.len()));
    for b in whole.bytes().chain(padded) {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(i128::from(b - b'0')))
            .ok_or_else(|| format!("{} does not fit decimal({p},{s})", text_shape(t)))?;
    }
    if n >= 10i128.pow(u32::from(p)) {
        return Err(format!("{} does not fit decimal({p},{s})", text_shape(t)));
    }
    Ok(if neg { -n } else { n })
}
