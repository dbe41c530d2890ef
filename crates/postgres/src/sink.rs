//! The PostgreSQL sink: one database transaction per micro-batch.
//!
//! In the transaction: the progress table's row for (query id, sink) is
//! locked and read — a batch at or below it was committed before a crash
//! and is skipped — then the batch is written, the row is set to the batch
//! id, and the transaction commits. The rows and the record of the batch
//! commit together, so a crash before the commit writes nothing and a
//! crash after it is recognised on the replay.
//!
//! - **append**: `COPY table (columns) FROM STDIN BINARY`;
//! - **update**: the batch (its last row per key) `COPY`-ed into a
//!   temporary table, then `INSERT ... SELECT ... ON CONFLICT (keys) DO
//!   UPDATE` — keys: the sink's `merge_keys`, else the table's primary key;
//! - **complete**: `DELETE FROM table`, then `COPY`.
//!
//! Columns are matched by name; a column of the table the flow does not
//! write keeps its default. Each value is encoded in its table column's
//! type (see `types`).

use std::fmt::Write as _;
use std::pin::pin;
use std::str::FromStr;
use std::sync::OnceLock;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config};

use crate::tls::Tls;

use crate::types::{cell, ddl_type, encoding, plain, Encoding};
use pipelines_core::connector::ColumnCheck;
use pipelines_core::engine::sink::{last_row_per_key, Sink, SinkContext, SinkWrite};
use pipelines_core::error::{Error, Result};
use pipelines_core::formats::OutputMode;
use pipelines_core::options::Options;

/// The runtime the connections live on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pipelines-postgres")
            .enable_all()
            .build()
            .expect("a tokio runtime for PostgreSQL connections")
    })
}

/// Runs `fut` on the connections' runtime, from sync code or from inside
/// another runtime.
fn block_on<F: std::future::Future + Send>(fut: F) -> F::Output
where
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime().block_on(fut);
    }
    std::thread::scope(|s| {
        s.spawn(|| runtime().block_on(fut))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// The connection settings from the sink's options: `url`, else `host`,
/// `port`, `database`; `user` and `password` on top; TLS from `sslmode`
/// and `sslrootcert` ([`crate::tls`]). A password inside the `url` is
/// refused (it would be stored with the options).
pub(crate) fn connection_config(options: &Options) -> Result<(Config, Tls)> {
    let (tls, url) = Tls::from_options(options)?;
    let mut config = match url.as_deref() {
        Some(url) => Config::from_str(url).map_err(|e| {
            Error::runtime_with_help(
                format!("option `url` is not a PostgreSQL connection string: {e}"),
                "write `postgres://user@host:5432/database`, or set `host`, `port` and `database` instead",
            )
        })?,
        None => {
            let mut c = Config::new();
            c.host(options.get("host").unwrap_or("localhost"));
            c.port(
                u16::try_from(options.positive("port")?.unwrap_or(5432))
                    .map_err(|_| options.invalid("port", options.get("port").unwrap_or(""), "a port number", "5432"))?,
            );
            if let Some(db) = options.get("database") {
                c.dbname(db);
            }
            c
        }
    };
    if options.get("url").is_some() && config.get_password().is_some() {
        return Err(Error::runtime_with_help(
            "option `url` holds a password",
            "move it to the option `password: ${PGPASSWORD}` (read from the environment, never stored)",
        ));
    }
    if let Some(user) = options.get("user") {
        config.user(user);
    }
    if let Some(password) = options.get("password") {
        config.password(password);
    }
    if config.get_user().is_none() {
        config.user(std::env::var("USER").unwrap_or_else(|_| "postgres".to_string()));
    }
    config.application_name("pipelines");
    config.ssl_mode(tls.wire_mode());
    Ok((config, tls))
}

/// A client of the server `config` names; its connection runs on the
/// sink's runtime until the client is dropped.
async fn connect(
    config: &Config,
    connector: tokio_postgres_rustls::MakeRustlsConnect,
) -> std::result::Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(connector).await?;
    runtime().spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("PostgreSQL connection closed: {e}");
        }
    });
    Ok(client)
}

/// `"a"."b"` for `a.b`, each part quoted.
fn quote_name(name: &str) -> String {
    name.split('.').map(quote).collect::<Vec<_>>().join(".")
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The host a connection goes to.
fn host_of(c: &Config) -> String {
    c.get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into())
}

/// Where a connection goes, for messages: `user@host:port/db`.
fn describe_config(c: &Config) -> String {
    let host = host_of(c);
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        c.get_user().unwrap_or(""),
        c.get_dbname().unwrap_or(c.get_user().unwrap_or(""))
    )
}

/// A database error with its detail and hint, as PostgreSQL gave them.
fn db_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut m = db.message().to_string();
            if let Some(d) = db.detail() {
                let _ = write!(m, " ({d})");
            }
            m
        }
        None => {
            // The cause (a TLS or I/O error) is not part of the text.
            let mut m = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let _ = write!(m, ": {c}");
                cause = c.source();
            }
            m
        }
    }
}

/// A sink writing into one PostgreSQL table.
pub struct PostgresSink {
    name: String,
    flow: String,
    query_id: String,
    client: Client,
    /// `"schema"."table"`, quoted.
    table: String,
    target: String,
    progress: String,
    /// The flow's columns: name (quoted), PostgreSQL type, encoding.
    columns: Vec<TableColumn>,
    schema: SchemaRef,
    keys: Vec<String>,
}

impl PostgresSink {
    /// Connects, creates the progress table (and the table, with
    /// `createTable`) when missing, and matches the flow's columns with the
    /// table's: a missing column or a type that cannot take the flow's is
    /// an error naming it.
    pub fn open(ctx: &SinkContext) -> Result<PostgresSink> {
        let options = Options::for_sink(&ctx.options, &ctx.name);
        let (config, tls) = connection_config(&options)?;
        let target = options.get("dbtable").map(str::to_string).ok_or_else(|| {
            Error::runtime_with_help(
                format!(
                    "sink `{}`: a postgres sink needs the option `dbtable`",
                    ctx.name
                ),
                "name the table: `dbtable: user_counts` (or `schema.table`)",
            )
        })?;
        let create = options.bool("createTable", true)?;
        let progress = quote_name(
            options
                .get("progressTable")
                .unwrap_or("pipelines_sink_progress"),
        );
        let table = quote_name(&target);
        let at = describe_config(&config);
        let name = ctx.name.clone();
        let client = block_on(connect(&config, tls.connector()?))
            .map_err(|e| connect_error(&name, &at, &e, &tls, &host_of(&config)))?;
        let sink_error = |what: &str, e: tokio_postgres::Error| {
            Error::runtime(format!("sink `{name}`: {what} in {at}: {}", db_message(&e)))
        };
        block_on(create_if_missing(&client, &format!(
            "CREATE TABLE IF NOT EXISTS {progress} (query_id TEXT NOT NULL, sink TEXT NOT NULL, batch_id BIGINT NOT NULL, PRIMARY KEY (query_id, sink))"
        )))
        .map_err(|e| sink_error("could not create the progress table", e))?;
        let mut table_columns = match block_on(client.prepare(&format!("SELECT * FROM {table} LIMIT 0"))) {
            Ok(st) => columns_of(&st),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) && create => {
                block_on(create_if_missing(&client, &create_table_sql(&table, &ctx.schema, &ctx.merge_keys)?))
                    .map_err(|e| sink_error(&format!("could not create table {target}"), e))?;
                let st = block_on(client.prepare(&format!("SELECT * FROM {table} LIMIT 0")))
                    .map_err(|e| sink_error(&format!("could not read table {target}"), e))?;
                columns_of(&st)
            }
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                return Err(Error::runtime_with_help(
                    format!("sink `{name}`: table {target} does not exist in {at}"),
                    "create it, or set `createTable: \"true\"` to create it from the flow's columns",
                ))
            }
            Err(e) => return Err(sink_error(&format!("could not read table {target}"), e)),
        };
        let columns = match_columns(
            &ctx.schema,
            &mut table_columns,
            &target,
            &format!("flow `{}`'s", ctx.flow),
        )
        .map_err(|mut problems| {
            let (message, help) = problems.swap_remove(0);
            Error::runtime_with_help(format!("sink `{name}`: {message}"), help)
        })?;
        let keys = if ctx.merge_keys.is_empty() {
            block_on(primary_key(&client, &table))
                .map_err(|e| sink_error("could not read the table's primary key", e))?
        } else {
            ctx.merge_keys.clone()
        };
        Ok(PostgresSink {
            name: ctx.name.clone(),
            flow: ctx.flow.clone(),
            query_id: ctx.query_id.clone(),
            client,
            table,
            target,
            progress,
            columns,
            schema: ctx.schema.clone(),
            keys,
        })
    }

    async fn committed(
        &self,
        tx: &Client,
    ) -> std::result::Result<Option<i64>, tokio_postgres::Error> {
        let row = tx
            .query_opt(
                &format!("{} FOR UPDATE", self.progress_query()),
                &[&self.query_id, &self.name],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// `COPY into (columns) FROM STDIN BINARY` of `batches`.
    async fn copy(
        &self,
        tx: &Client,
        into: &str,
        batches: &[RecordBatch],
    ) -> std::result::Result<u64, CopyError> {
        let names: Vec<&str> = self.columns.iter().map(|(n, _, _)| n.as_str()).collect();
        let types: Vec<Type> = self.columns.iter().map(|(_, t, _)| t.clone()).collect();
        let sink = tx
            .copy_in(&format!(
                "COPY {into} ({}) FROM STDIN BINARY",
                names.join(", ")
            ))
            .await?;
        let mut writer = pin!(BinaryCopyInWriter::new(sink, &types));
        for batch in batches {
            let arrays: Vec<ArrayRef> = batch
                .columns()
                .iter()
                .map(plain)
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| CopyError::Value(e.to_string()))?;
            for row in 0..batch.num_rows() {
                let cells = arrays
                    .iter()
                    .zip(&self.columns)
                    .map(|(a, (_, _, enc))| cell(a, row, *enc))
                    .collect::<std::result::Result<Vec<_>, String>>()
                    .map_err(|e| CopyError::Value(format!("row {row}: {e}")))?;
                let refs: Vec<&(dyn ToSql + Sync)> =
                    cells.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
                writer.as_mut().write(&refs).await?;
            }
        }
        Ok(writer.finish().await?)
    }

    /// The batch in one transaction (`BEGIN` ... `COMMIT`, rolled back on
    /// any error); None when it was committed before.
    async fn write(
        &self,
        batch_id: u64,
        batches: &[RecordBatch],
        mode: OutputMode,
    ) -> std::result::Result<Option<u64>, CopyError> {
        let tx = &self.client;
        tx.batch_execute("BEGIN").await?;
        let result = self.write_in_transaction(batch_id, batches, mode).await;
        match result {
            Ok(Some(rows)) => {
                tx.batch_execute("COMMIT").await?;
                Ok(Some(rows))
            }
            other => {
                let _ = tx.batch_execute("ROLLBACK").await;
                other
            }
        }
    }

    async fn write_in_transaction(
        &self,
        batch_id: u64,
        batches: &[RecordBatch],
        mode: OutputMode,
    ) -> std::result::Result<Option<u64>, CopyError> {
        let tx = &self.client;
        if self
            .committed(tx)
            .await?
            .is_some_and(|b| b >= batch_id as i64)
        {
            return Ok(None);
        }
        let rows = match mode {
            OutputMode::Append => self.copy(tx, &self.table, batches).await?,
            OutputMode::Complete => {
                tx.batch_execute(&format!("DELETE FROM {}", self.table))
                    .await?;
                self.copy(tx, &self.table, batches).await?
            }
            OutputMode::Update => self.upsert(tx, batches).await?,
        };
        tx.execute(
            &format!(
                "INSERT INTO {} (query_id, sink, batch_id) VALUES ($1, $2, $3) ON CONFLICT (query_id, sink) DO UPDATE SET batch_id = EXCLUDED.batch_id",
                self.progress
            ),
            &[&self.query_id, &self.name, &(batch_id as i64)],
        )
        .await?;
        // Killed here (the crash tests), the transaction never commits.
        pipelines_core::engine::fault::fault_point(&self.flow, "postgres_before_commit", batch_id);
        Ok(Some(rows))
    }

    async fn upsert(
        &self,
        tx: &Client,
        batches: &[RecordBatch],
    ) -> std::result::Result<u64, CopyError> {
        if self.keys.is_empty() {
            return Err(CopyError::NoKeys);
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                self.schema
                    .fields()
                    .iter()
                    .find(|f| f.name().eq_ignore_ascii_case(k))
                    .map(|f| f.name().clone())
                    .ok_or_else(|| CopyError::KeyNotWritten(k.clone()))
            })
            .collect::<std::result::Result<_, _>>()?;
        let batches = last_row_per_key(batches, &self.schema, &keys)
            .map_err(|e| CopyError::Value(e.to_string()))?;
        let staging = "pipelines_batch";
        tx.batch_execute(&format!(
            "CREATE TEMP TABLE IF NOT EXISTS {staging} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS",
            self.table
        ))
        .await?;
        let rows = self.copy(tx, staging, &batches).await?;
        let names: Vec<&str> = self.columns.iter().map(|(n, _, _)| n.as_str()).collect();
        let quoted_keys: Vec<String> = keys.iter().map(|k| quote(k)).collect();
        let updates: Vec<String> = names
            .iter()
            .filter(|n| !quoted_keys.iter().any(|k| k.eq_ignore_ascii_case(n)))
            .map(|n| format!("{n} = EXCLUDED.{n}"))
            .collect();
        let action = if updates.is_empty() {
            "NOTHING".to_string()
        } else {
            format!("UPDATE SET {}", updates.join(", "))
        };
        tx.batch_execute(&format!(
            "INSERT INTO {table} ({cols}) SELECT {cols} FROM {staging} ON CONFLICT ({keys}) DO {action}",
            table = self.table,
            cols = names.join(", "),
            keys = quoted_keys.join(", ")
        ))
        .await?;
        Ok(rows)
    }
}

/// Why a batch was not written.
#[derive(Debug)]
enum CopyError {
    Db(tokio_postgres::Error),
    Value(String),
    NoKeys,
    KeyNotWritten(String),
}

impl From<tokio_postgres::Error> for CopyError {
    fn from(e: tokio_postgres::Error) -> Self {
        CopyError::Db(e)
    }
}

/// A table column a flow's column goes to: its quoted name, its type and
/// how values are encoded for it.
type TableColumn = (String, Type, Encoding);

/// Matches the flow's columns (`schema`) with the table's by name (exact,
/// else ignoring case): each one's quoted name, PostgreSQL type and
/// encoding, or every column that has no match or cannot take the flow's
/// type, as (message, help). `whose`: "flow `x`'s" or "the flow's".
fn match_columns(
    schema: &SchemaRef,
    table_columns: &mut Vec<(String, Type)>,
    target: &str,
    whose: &str,
) -> std::result::Result<Vec<TableColumn>, Vec<(String, String)>> {
    let listed = table_columns
        .iter()
        .map(|(c, t)| format!("{c} {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut columns = Vec::new();
    let mut problems = Vec::new();
    for f in schema.fields() {
        let found = table_columns
            .iter()
            .position(|(c, _)| c == f.name())
            .or_else(|| {
                table_columns
                    .iter()
                    .position(|(c, _)| c.eq_ignore_ascii_case(f.name()))
            });
        let Some(i) = found else {
            problems.push((
                format!(
                    "column `{}` of {whose} output is not a column of table {target} ({listed})",
                    f.name()
                ),
                format!(
                    "add it (`ALTER TABLE {target} ADD COLUMN \"{}\" {}`), or drop it from the flow's query",
                    f.name(),
                    ddl_type(f.data_type()).unwrap_or("...")
                ),
            ));
            continue;
        };
        let (column, pg_type) = table_columns.swap_remove(i);
        let Some(enc) = encoding(f.data_type(), &pg_type) else {
            problems.push((
                format!(
                    "column `{}` is {} in {whose} output but {pg_type} in table {target}",
                    f.name(),
                    pipelines_core::plan::ddl::type_to_ddl(f.data_type()),
                ),
                format!(
                    "cast `{}` in the flow's query to a type the column takes, or change the column's type to {}",
                    f.name(),
                    ddl_type(f.data_type()).unwrap_or("a matching type")
                ),
            ));
            continue;
        };
        columns.push((quote(&column), pg_type, enc));
    }
    if problems.is_empty() {
        Ok(columns)
    } else {
        Err(problems)
    }
}

/// Dry-run's look at the table: when the server answers (within 5 s), every
/// column of the flow's output (`schema`) the table lacks or cannot take,
/// and a missing table when `createTable` is off, as (message, help). A
/// server that does not answer is a warning, not a problem: the run checks
/// again when the sink opens (and fails there, naming the address).
pub(crate) fn check_table(schema: &SchemaRef, options: &Options) -> ColumnCheck {
    let Ok((mut config, tls)) = connection_config(options) else {
        return ColumnCheck::default(); // check_options reports it.
    };
    let Some(target) = options.get("dbtable").map(str::to_string) else {
        return ColumnCheck::default();
    };
    let Ok(connector) = tls.connector() else {
        return ColumnCheck::default();
    };
    config.connect_timeout(std::time::Duration::from_secs(5));
    let at = describe_config(&config);
    let table = quote_name(&target);
    let looked = block_on(async {
        let client = connect(&config, connector).await?;
        Ok::<_, tokio_postgres::Error>(
            client
                .prepare(&format!("SELECT * FROM {table} LIMIT 0"))
                .await,
        )
    });
    match looked {
        Err(e) => ColumnCheck {
            problems: Vec::new(),
            warnings: vec![format!(
                "table {target} not checked against the flow's columns: could not connect to PostgreSQL at {at}: {} (the run connects again, and stops if it cannot)",
                db_message(&e)
            )],
        },
        Ok(Ok(st)) => match_columns(schema, &mut columns_of(&st), &target, "the flow's")
            .err()
            .unwrap_or_default()
            .into(),
        Ok(Err(e)) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
            if options.bool("createTable", true).unwrap_or(true) {
                ColumnCheck::default()
            } else {
                vec![(
                    format!("table {target} does not exist in {at}"),
                    "create it, or set `createTable: \"true\"` to create it from the flow's columns"
                        .to_string(),
                )]
                .into()
            }
        }
        Ok(Err(e)) => vec![(
            format!("could not read table {target} in {at}: {}", db_message(&e)),
            "check that the role may read the table (`GRANT SELECT`)".to_string(),
        )]
        .into(),
    }
}

/// The columns of a statement's rows: (name, type).
fn columns_of(st: &tokio_postgres::Statement) -> Vec<(String, Type)> {
    st.columns()
        .iter()
        .map(|c| (c.name().to_string(), c.type_().clone()))
        .collect()
}

/// Runs a `CREATE ... IF NOT EXISTS`; another session creating the same
/// table at the same moment (PostgreSQL then reports a duplicate) is fine.
async fn create_if_missing(
    client: &Client,
    sql: &str,
) -> std::result::Result<(), tokio_postgres::Error> {
    match client.batch_execute(sql).await {
        Err(e)
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION)
                || e.code() == Some(&SqlState::DUPLICATE_TABLE) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The primary key columns of `table`, in order (empty without one).
async fn primary_key(
    client: &Client,
    table: &str,
) -> std::result::Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
             WHERE i.indrelid = $1::text::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
            &[&table],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// `CREATE TABLE` from the flow's columns, the merge keys as primary key.
fn create_table_sql(table: &str, schema: &SchemaRef, keys: &[String]) -> Result<String> {
    let mut columns = Vec::new();
    for f in schema.fields() {
        let t = ddl_type(f.data_type()).ok_or_else(|| {
            Error::runtime(format!(
                "column `{}` is {}, which has no PostgreSQL column type here",
                f.name(),
                pipelines_core::plan::ddl::type_to_ddl(f.data_type())
            ))
        })?;
        columns.push(format!("{} {t}", quote(f.name())));
    }
    if !keys.is_empty() {
        columns.push(format!(
            "PRIMARY KEY ({})",
            keys.iter().map(|k| quote(k)).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {table} ({})",
        columns.join(", ")
    ))
}

fn connect_error(sink: &str, at: &str, e: &tokio_postgres::Error, tls: &Tls, host: &str) -> Error {
    let message = db_message(e);
    if let Some(help) = tls.handshake_help(&message, host) {
        return Error::runtime_with_help(
            format!(
                "sink `{sink}`: could not connect to PostgreSQL at {at} (sslmode {}): {message}",
                tls.mode.name()
            ),
            help,
        );
    }
    let help = match e.code() {
        Some(c) if *c == SqlState::INVALID_PASSWORD => {
            "check the password: the option `password` (write `${PGPASSWORD}` to read it from the environment)"
        }
        Some(c) if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            "check the role (`user`) and that the server lets it connect from here (pg_hba.conf)"
        }
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => "check the database name, or create it",
        _ => "check that the server runs and `url` (or `host`, `port`, `database`, `user`) points at it",
    };
    Error::runtime_with_help(
        format!(
            "sink `{sink}`: could not connect to PostgreSQL at {at}: {}",
            db_message(e)
        ),
        help,
    )
}

impl Sink for PostgresSink {
    fn describe(&self) -> String {
        format!("postgres sink `{}` (table {})", self.name, self.target)
    }

    fn has_batch(&self, batch_id: u64) -> Option<bool> {
        let row = block_on(
            self.client
                .query_opt(&self.progress_query(), &[&self.query_id, &self.name]),
        )
        .ok()?;
        Some(row.is_some_and(|r| r.get::<_, i64>(0) >= batch_id as i64))
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
    ) -> Result<SinkWrite> {
        let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
        match block_on(self.write(batch_id, &batches, mode)) {
            Ok(None) => Ok(SinkWrite {
                skipped_replay: true,
                ..SinkWrite::default()
            }),
            Ok(Some(rows)) => Ok(SinkWrite {
                rows,
                ..SinkWrite::default()
            }),
            Err(e) => Err(self.batch_error(batch_id, e)),
        }
    }
}

impl PostgresSink {
    /// The query of this sink's last committed batch (`$1` query id, `$2` sink).
    fn progress_query(&self) -> String {
        format!(
            "SELECT batch_id FROM {} WHERE query_id = $1 AND sink = $2",
            self.progress
        )
    }

    fn batch_error(&self, batch_id: u64, e: CopyError) -> Error {
        let what = format!(
            "sink `{}`: batch {batch_id} of flow `{}` was not written to table {}",
            self.name, self.flow, self.target
        );
        match e {
            CopyError::NoKeys => Error::runtime_with_help(
                format!("{what}: update mode upserts by key, but the sink has no merge_keys and the table no primary key"),
                "declare the keys: `merge_keys: [user_id]` on the sink, or give the table a primary key",
            ),
            CopyError::KeyNotWritten(k) => Error::runtime_with_help(
                format!("{what}: the key `{k}` is not a column of the flow's output"),
                "write the key column in the flow's query, or change `merge_keys`",
            ),
            CopyError::Value(v) => Error::runtime_with_help(
                format!("{what}: {v}"),
                "cast the column in the flow's query to one the table's column holds; nothing of the batch was written",
            ),
            CopyError::Db(e) if e.code() == Some(&SqlState::INVALID_COLUMN_REFERENCE) => Error::runtime_with_help(
                format!("{what}: {}", db_message(&e)),
                format!(
                    "the upsert needs a unique index on the keys: `CREATE UNIQUE INDEX ON {} ({})`",
                    self.target,
                    self.keys.join(", ")
                ),
            ),
            CopyError::Db(e) => Error::runtime_with_help(
                format!("{what}: {}", db_message(&e)),
                "nothing of the batch was written; it is written on the next run",
            ),
        }
    }
}
