//! `lakestream sql "SELECT ..."`: DataFusion over the lake's tables (cargo feature `sql`; the
//! Lambda functions never link DataFusion).
//!
//! Every table the config knows (the topics' tables, the dead-letter table, the refine outputs,
//! the access-log tables) is queryable under its path with `/` and `-` as `_` (`raw/order` ->
//! `raw_order`, `access_logs/datalake-prod` -> `access_logs_datalake_prod`); `--at TABLE=V` adds
//! version V as `<name>_v<V>`. A name two tables share (`raw_order`, `raw-order`) is refused
//! when a query uses it, naming both tables. A table is read (our reader, the live files of its snapshot) only
//! when the query names it, into memory: fine for a laptop-sized look at the lake; for large
//! tables use Athena, Trino or DuckDB (`lakestream ddl`, README). Read-only: DDL (`CREATE
//! EXTERNAL TABLE` over a local file), DML (`COPY ... TO` a local file, `INSERT`) and session
//! statements are refused before anything runs.

use anyhow::{Context, Result, bail};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;
use deltalake::arrow::array::RecordBatch;
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use lakestream_core::Lake;
use lakestream_core::inspect::{AsOf, ddl::athena_name, read_as_of};
use lakestream_formats::config::PipelineConfig;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A text table.
    Table,
    /// CSV with a header.
    Csv,
    /// JSON lines.
    Json,
}

/// The lake's tables: SQL name -> (table path, version), and the SQL names several tables share
/// (`raw_order` and `raw-order` are both `raw_order`) with those tables.
pub struct Catalog {
    /// Names that belong to exactly one table (or one `--at` version of it).
    pub tables: BTreeMap<String, (String, Option<u64>)>,
    /// Names more than one table maps to: never registered, a query naming one fails.
    pub ambiguous: BTreeMap<String, Vec<String>>,
}

/// Build the [`Catalog`] from the pipeline's one table list plus the `--at` versions.
pub async fn catalog(
    lake: &Lake,
    config: &PipelineConfig,
    at: &[(String, u64)],
) -> Result<Catalog> {
    // The pipeline's one table list (the maintenance schedule's too).
    let tables = lakestream_core::maintenance::maintained_tables(config, lake).await?;
    let mut by_name: BTreeMap<String, Vec<(String, Option<u64>)>> = BTreeMap::new();
    for t in tables {
        by_name
            .entry(athena_name(&t.name))
            .or_default()
            .push((t.name, None));
    }
    for (table, v) in at {
        by_name
            .entry(format!("{}_v{v}", athena_name(table)))
            .or_default()
            .push((table.clone(), Some(*v)));
    }
    let mut out = Catalog {
        tables: BTreeMap::new(),
        ambiguous: BTreeMap::new(),
    };
    for (name, mut entries) in by_name {
        entries.sort();
        entries.dedup();
        if entries.len() == 1 {
            out.tables.insert(name, entries.remove(0));
        } else {
            let paths = entries.into_iter().map(|(t, _)| t).collect();
            out.ambiguous.insert(name, paths);
        }
    }
    Ok(out)
}

/// Run `query` and print the result.
pub async fn run(
    lake: &Lake,
    config: &PipelineConfig,
    query: &str,
    at: &[(String, u64)],
    format: Format,
) -> Result<()> {
    let batches = query_lake(lake, config, query, at).await?;
    print(&batches, format)
}

/// Run `query` over the lake; the tables it names are loaded.
pub async fn query_lake(
    lake: &Lake,
    config: &PipelineConfig,
    query: &str,
    at: &[(String, u64)],
) -> Result<Vec<RecordBatch>> {
    let Catalog {
        tables: catalog,
        ambiguous,
    } = catalog(lake, config, at).await?;
    let named: HashSet<String> = query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_ascii_lowercase)
        .collect();
    if let Some((name, tables)) = ambiguous.iter().find(|(n, _)| named.contains(*n)) {
        let tables: Vec<String> = tables.iter().map(|t| format!("`{t}`")).collect();
        bail!(
            "`{name}` is the SQL name of {} tables: {}; rename one in the config, or query it \
             by path with DuckDB or Athena (`lakestream ddl TABLE --name NAME`)",
            tables.len(),
            tables.join(", ")
        );
    }
    let ctx = SessionContext::new();
    let mut loaded = 0;
    for (name, (table, version)) in &catalog {
        if !named.contains(name) {
            continue;
        }
        let as_of = version.map_or(AsOf::Latest, AsOf::Version);
        let batch = match read_as_of(lake, table, as_of).await {
            Ok((_, b)) => b,
            Err(lakestream_core::Error::TableNotFound(_)) => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {table} for `{name}`")),
        };
        let mem = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        ctx.register_table(name.as_str(), Arc::new(mem))?;
        loaded += 1;
    }
    if loaded == 0 && !catalog.is_empty() && query.to_ascii_lowercase().contains("from") {
        let names: Vec<&str> = catalog.keys().map(String::as_str).collect();
        tracing::info!(tables = ?names, "the query names none of the lake's tables");
    }
    let plan = ctx
        .state()
        .create_logical_plan(query)
        .await
        .with_context(|| {
            let names: Vec<&str> = catalog.keys().map(String::as_str).collect();
            format!("tables of this lake: {}", names.join(", "))
        })?;
    // Read-only: no DDL (`CREATE EXTERNAL TABLE ... LOCATION '/etc/passwd'`), no DML (`COPY ...
    // TO '/tmp/x.csv'`, `INSERT`), no session statements (`SET`); the plan is checked before
    // anything runs, so nothing is read outside the lake's tables and nothing is written.
    read_only().verify_plan(&plan).map_err(|e| {
        anyhow::anyhow!(
            "`lakestream sql` is read-only: only queries (SELECT, EXPLAIN) over the lake's tables              run; {e}. Nothing was read or written. To export a result use --format csv|json and              redirect the output"
        )
    })?;
    let df = ctx.execute_logical_plan(plan).await?;
    Ok(df.collect().await?)
}

/// What `lakestream sql` runs: queries only (DDL, DML and statements refused).
fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// `TABLE=V` of `--at`.
pub fn parse_at(text: &str) -> Result<(String, u64)> {
    let Some((table, v)) = text.rsplit_once('=') else {
        bail!("--at `{text}`: expected TABLE=VERSION, e.g. raw/order=3");
    };
    Ok((
        table.to_string(),
        v.parse()
            .with_context(|| format!("--at `{text}`: version"))?,
    ))
}

fn print(batches: &[RecordBatch], format: Format) -> Result<()> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match format {
        Format::Table => writeln!(
            out,
            "{}",
            arrow::util::pretty::pretty_format_batches(batches)?
        )?,
        Format::Json => {
            let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
        }
        Format::Csv => {
            let Some(first) = batches.first() else {
                return Ok(());
            };
            let header: Vec<String> = first
                .schema()
                .fields()
                .iter()
                .map(|f| csv_field(f.name()))
                .collect();
            writeln!(out, "{}", header.join(","))?;
            let options = FormatOptions::default().with_null("");
            for b in batches {
                let formatters = b
                    .columns()
                    .iter()
                    .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                for row in 0..b.num_rows() {
                    let cells: Vec<String> = formatters
                        .iter()
                        .map(|f| csv_field(&f.value(row).to_string()))
                        .collect();
                    writeln!(out, "{}", cells.join(","))?;
                }
            }
        }
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
