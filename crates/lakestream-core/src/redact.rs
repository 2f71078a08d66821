//! What may reach the logs (CloudWatch) about bad input: reason *classes* and positions, never
//! the values. A rejected record keeps its raw bytes and full reason in the dead-letter table;
//! the reasons quote values (arrow: `failed to parse "4111111111111111" as Int32`), so log
//! lines, `Diagnostic` messages and partial-batch failure reasons use what this module makes:
//!
//! - [`reason_class`]: a fixed label (`type-mismatch`, `invalid-json`, ...) for a dead-letter
//!   reason; it returns `&'static str`, so no byte of the reason can pass through;
//! - [`scrub`]: free text from other libraries (delta-rs, arrow, object_store, serde) with every
//!   double-quoted span and every run of 8 or more digits replaced, for error messages that
//!   still need their words (a storage error's status, a table name).

/// The class of a dead-letter reason (or of a notification body's rejection): a fixed label.
pub fn reason_class(reason: &str) -> &'static str {
    const CLASSES: &[(&str, &str)] = &[
        ("partition value too long", "partition-value-too-long"),
        ("outside the years 0001-9999", "timestamp-out-of-range"),
        ("as a timestamp", "bad-timestamp"),
        ("Kafka timestamp", "bad-kafka-timestamp"),
        ("failed to parse", "type-mismatch"),
        ("cannot be read as", "type-mismatch"),
        ("whilst decoding field", "type-mismatch"),
        ("expected", "type-mismatch"),
        ("differ only in case", "duplicate-column"),
        ("column mapping", "column-name-refused"),
        ("an empty name cannot be a column", "column-name-refused"),
        ("SNS Message is not JSON", "sns-message-not-json"),
        ("body is not JSON", "not-json"),
        ("invalid JSON", "invalid-json"),
        ("not a JSON object", "not-a-json-object"),
        ("not valid UTF-8", "invalid-utf8"),
        ("is not valid UTF-8", "invalid-utf8"),
        ("not base64", "not-base64"),
        ("null value", "null-value"),
        ("value is empty", "empty-value"),
        ("no table is configured for topic", "unknown-topic"),
        ("refused the write", "table-refused"),
        ("cannot be ingested", "batch-refused"),
        ("unsupported eventVersion", "unsupported-event-version"),
        ("not an S3 notification", "not-a-notification"),
        ("SNS envelope", "bad-sns-envelope"),
        ("EventBridge", "bad-eventbridge-event"),
        ("missing", "missing-field"),
        ("late:", "late"),
        ("future:", "future"),
    ];
    CLASSES
        .iter()
        .find(|(needle, _)| reason.contains(needle))
        .map_or("other", |(_, class)| class)
}

/// Words after which a single-quoted span is a value, not a name.
const VALUE_BEFORE_QUOTE: &[&str] = &[
    "string ", "from ", "value ", "parse ", "parsing ", "literal ", "input ", "cast ",
];

/// `text` with every double-quoted span (escapes honoured; an unterminated one runs to the
/// end) replaced by `"…"`, the value of every `name=value` (a Hive partition segment of an
/// object key, `order_owner=4111-1111-1111-1111/part-...`, or `%3D` in a URL) by `…` up to the
/// next `/`, space, quote, `,`, `;`, `)`, `]`, `<`, `>` or `&`, every single-quoted span after a
/// word that introduces a value (`string '...'`, `from '...'`) by `'…'`, and every run of 8 or
/// more ASCII digits by `<digits>`.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.len() >= 8 {
            out.push_str("<digits>");
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        flush(&mut digits, &mut out);
        if c == '"' {
            out.push_str("\"…\"");
            let mut escaped = false;
            for q in chars.by_ref() {
                match (escaped, q) {
                    (false, '\\') => escaped = true,
                    (false, '"') => break,
                    _ => escaped = false,
                }
            }
            continue;
        }
        // Single quotes hold names (`field 'order_id'`) and, after these words, values: arrow's
        // `Cannot cast string 'alice@example.com' to value of Int64 type`, `Error parsing
        // timestamp from '...'`.
        if c == '\'' && VALUE_BEFORE_QUOTE.iter().any(|w| out.ends_with(w)) {
            out.push_str("'…'");
            // The span ends at a quote not followed by a letter or digit (`'O'Brien'` is one).
            while let Some(q) = chars.next() {
                if q == '\'' && chars.peek().is_none_or(|n| !n.is_alphanumeric()) {
                    break;
                }
            }
            continue;
        }
        let after_name = out
            .chars()
            .last()
            .is_some_and(|p| p.is_ascii_alphanumeric() || p == '_');
        let ends_value = |q: char| {
            q.is_whitespace()
                || matches!(
                    q,
                    '/' | '"' | '\'' | '`' | ',' | ';' | ')' | ']' | '<' | '>' | '&'
                )
        };
        // `=`, or `%3D` (the same key in a URL: `order_owner%3D4111-...`).
        let equals = match c {
            '=' => Some("="),
            '%' if after_name => {
                let mut ahead = chars.clone();
                match (ahead.next(), ahead.next()) {
                    (Some('3'), Some(d @ ('D' | 'd'))) => {
                        chars.next();
                        chars.next();
                        Some(if d == 'D' { "%3D" } else { "%3d" })
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(eq) = equals {
            if after_name && chars.peek().is_some_and(|q| !ends_value(*q)) {
                out.push_str(eq);
                out.push('…');
                while chars.next_if(|q| !ends_value(*q)).is_some() {}
            } else {
                out.push_str(eq);
            }
            continue;
        }
        out.push(c);
    }
    flush(&mut digits, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_never_pass() {
        let arrow =
            r#"whilst decoding field 'order_id': failed to parse "4111111111111111" as Int32"#;
        assert_eq!(reason_class(arrow), "type-mismatch");
        assert_eq!(
            scrub(arrow),
            r#"whilst decoding field 'order_id': failed to parse "…" as Int32"#
        );
        assert_eq!(
            scrub("failed to parse 4012888888881881 as Int32"),
            "failed to parse <digits> as Int32"
        );
        assert_eq!(
            scrub(r#"a "b\"4111" c "unterminated 4111"#),
            r#"a "…" c "…""#
        );
        assert_eq!(
            scrub("version 1234567 of `raw/order`"),
            "version 1234567 of `raw/order`"
        );
        assert_eq!(reason_class("anything else"), "other");
    }

    #[test]
    fn single_quoted_values_never_pass_and_names_stay() {
        let arrow =
            "Cast error: Cannot cast string 'alice.secret@example.com' to value of Int64 type";
        assert_eq!(
            scrub(arrow),
            "Cast error: Cannot cast string '…' to value of Int64 type"
        );
        assert_eq!(
            scrub("Parser error: Error parsing timestamp from 'alice@x.org': bad"),
            "Parser error: Error parsing timestamp from '…': bad"
        );
        assert_eq!(
            scrub("Cannot cast string 'O'Brien' to value of Int64 type"),
            "Cannot cast string '…' to value of Int64 type"
        );
        assert_eq!(
            scrub("whilst decoding field 'email' of 'raw/order'"),
            "whilst decoding field 'email' of 'raw/order'"
        );
    }

    #[test]
    fn partition_values_in_paths_never_pass() {
        assert_eq!(
            scrub(
                "Object at location /lake/raw/member/order_owner=4111111111111111/part-00000-a.parquet not found"
            ),
            "Object at location /lake/raw/member/order_owner=…/part-00000-a.parquet not found"
        );
        assert_eq!(
            scrub(
                "s3://b/p/raw/member/order_owner=4111-1111-1111-1111/date=2026-12-01/part-0.parquet: 403"
            ),
            "s3://b/p/raw/member/order_owner=…/date=…/part-0.parquet: 403"
        );
        assert_eq!(
            scrub("key `raw/member/order_owner=John%20Doe/x.parquet`"),
            "key `raw/member/order_owner=…/x.parquet`"
        );
        assert_eq!(scrub("a = b, x=, (os error 2)"), "a = b, x=, (os error 2)");
        assert_eq!(
            scrub("GET http://h/b/raw/member/order_owner%3D4111-1111-1111-1111/part-0.parquet 404"),
            "GET http://h/b/raw/member/order_owner%3D…/part-0.parquet 404"
        );
        assert_eq!(scrub("<Key>t/k=v-1-2</Key> 100%"), "<Key>t/k=…</Key> 100%");
    }
}
