//! Declared CDC columns: `"<name> <type>"` entries of a family's `columns`.

/// A declared column: `"<name> <type>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcColumn {
    /// Column name.
    pub name: String,
    /// Its type.
    pub data_type: CdcType,
}

/// Types a CDC column may be declared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CdcType {
    /// UTF-8 text (`string`).
    String,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `boolean`.
    Boolean,
    /// `timestamp`: instant, µs, UTC (ISO-8601 text, or epoch ms / µs / ns per the source).
    Timestamp,
    /// `date` (`YYYY-MM-DD`, or days since the epoch).
    Date,
    /// `decimal(p,s)`: precision <= 38.
    Decimal(u8, i8),
    /// `binary` (bytes; base64 in JSON).
    Binary,
}

impl CdcColumn {
    /// Parse `"<name> <type>"`.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        let (name, ty) = text
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("\"{text}\": write \"<name> <type>\", e.g. \"id int64\""))?;
        let ty = ty.trim().to_ascii_lowercase();
        let data_type = match ty.as_str() {
            "string" => CdcType::String,
            "int32" => CdcType::Int32,
            "int64" => CdcType::Int64,
            "float64" => CdcType::Float64,
            "boolean" => CdcType::Boolean,
            "timestamp" => CdcType::Timestamp,
            "date" => CdcType::Date,
            "binary" => CdcType::Binary,
            d if d.starts_with("decimal(") && d.ends_with(')') => {
                let inner = &d["decimal(".len()..d.len() - 1];
                let (p, s) = inner
                    .split_once(',')
                    .ok_or_else(|| format!("\"{ty}\": write decimal(<precision>,<scale>)"))?;
                let p: u8 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("\"{ty}\": bad precision"))?;
                let s: i8 = s
                    .trim()
                    .parse()
                    .map_err(|_| format!("\"{ty}\": bad scale"))?;
                if p == 0 || p > 38 || s < 0 || s as u8 > p {
                    return Err(format!(
                        "\"{ty}\": precision 1..=38 and 0 <= scale <= precision"
                    ));
                }
                CdcType::Decimal(p, s)
            }
            _ => {
                return Err(format!(
                    "\"{ty}\" is not a type: use string, int32, int64, float64, boolean, timestamp, date, decimal(p,s) or binary"
                ));
            }
        };
        Ok(Self {
            name: name.to_string(),
            data_type,
        })
    }
}
