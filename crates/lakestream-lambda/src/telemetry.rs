//! JSON logs through `tracing`, and one CloudWatch Embedded Metric Format line per invocation.

use serde_json::{Map, Value, json};

/// Install a JSON `tracing` subscriber (call once from `main`). `filter` is an env-filter
/// directive such as `info` or `lakestream_core=debug`.
pub fn init_tracing(filter: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder
            .json()
            .without_time()
            .with_span_list(false)
            .try_init()
    } else {
        builder.compact().try_init()
    };
}

/// A metric of an EMF line.
#[derive(Debug, Clone)]
pub struct Metric {
    /// Metric name.
    pub name: &'static str,
    /// CloudWatch unit (`Count`, `Bytes`, `Milliseconds`, `None`).
    pub unit: &'static str,
    /// Value.
    pub value: f64,
}

impl Metric {
    /// A metric.
    pub fn new(name: &'static str, unit: &'static str, value: impl Into<f64>) -> Self {
        Self {
            name,
            unit,
            value: value.into(),
        }
    }
}

/// Render one EMF JSON line (print it to stdout; CloudWatch turns it into metrics).
pub fn emf_line(
    namespace: &str,
    dimensions: &[(&str, &str)],
    metrics: &[Metric],
    timestamp_ms: i64,
) -> String {
    emf_record(namespace, dimensions, metrics, &[], timestamp_ms)
}

/// One EMF JSON line whose `metrics` become CloudWatch metrics and whose `properties` are only
/// logged (searchable in Logs Insights, never billed as custom metrics: each metric name per
/// dimension value is one, $0.30 a month). Without metrics the line is a plain JSON log line.
pub fn emf_record(
    namespace: &str,
    dimensions: &[(&str, &str)],
    metrics: &[Metric],
    properties: &[Metric],
    timestamp_ms: i64,
) -> String {
    let mut root = Map::new();
    let dims: Vec<&str> = dimensions.iter().map(|d| d.0).collect();
    let defs: Vec<Value> = metrics
        .iter()
        .map(|m| json!({"Name": m.name, "Unit": m.unit}))
        .collect();
    if !defs.is_empty() {
        root.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [dims], "Metrics": defs}]}),
        );
    } else {
        root.insert("timestamp".into(), json!(timestamp_ms));
    }
    for (k, v) in dimensions {
        root.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    for m in metrics.iter().chain(properties) {
        root.insert(m.name.to_string(), json!(m.value));
    }
    Value::Object(root).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_shape() -> Result<(), serde_json::Error> {
        let line = emf_line(
            "Lakestream",
            &[("Function", "msk-ingest")],
            &[Metric::new("RecordsReceived", "Count", 3)],
            1000,
        );
        let v: Value = serde_json::from_str(&line)?;
        assert_eq!(v["Function"], "msk-ingest");
        assert_eq!(v["RecordsReceived"], 3.0);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0][0],
            "Function"
        );
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "RecordsReceived"
        );
        Ok(())
    }

    #[test]
    fn properties_are_logged_not_declared() -> Result<(), serde_json::Error> {
        let m = [Metric::new("LagSeconds", "Seconds", 3)];
        let p = [Metric::new("Runs", "Count", 2)];
        let v: Value = serde_json::from_str(&emf_record("L", &[("Job", "j")], &m, &p, 1))?;
        assert_eq!(v["Runs"], 2.0);
        let declared = &v["_aws"]["CloudWatchMetrics"][0]["Metrics"];
        assert_eq!(declared.as_array().map(Vec::len), Some(1), "{v}");
        let none: Value = serde_json::from_str(&emf_record("L", &[("Job", "j")], &[], &p, 1))?;
        assert!(none.get("_aws").is_none(), "{none}");
        assert_eq!(none["Runs"], 2.0);
        Ok(())
    }
}
