//! The `postgres` connector: its options, the checks `dry-run` makes
//! (values, column types), and its registration.

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;

use crate::sink::{check_table, connection_config, PostgresSink};
use crate::types::ddl_type;
use pipelines_core::connector::{ColumnCheck, Connector, ConnectorRegistration, SinkConnector};
use pipelines_core::engine::connectors::ALL_MODES;
use pipelines_core::engine::sink::{Sink, SinkContext};
use pipelines_core::error::Result;
use pipelines_core::formats::OutputMode;
use pipelines_core::options::{OptionDecl, OptionKind::*, OptionSet, Options};

static SINK_OPTIONS: OptionSet = OptionSet::new(&[
    OptionDecl::new(
        "url",
        Text,
        "the server and database, `postgres://user@host:5432/database` (or `host=... dbname=...`); the password goes in `password`",
    ),
    OptionDecl::new("host", Text, "the server's host, without `url`").default_value("localhost"),
    OptionDecl::new("port", Positive, "the server's port, without `url`").default_value("5432"),
    OptionDecl::new("database", Text, "the database, without `url`"),
    OptionDecl::new("user", Text, "the role to connect as"),
    OptionDecl::new(
        "password",
        Text,
        "the role's password: write `${ENV_VAR}` so it stays out of the spec; it is never stored in the checkpoint",
    ),
    OptionDecl::new(
        "sslmode",
        Choice(crate::tls::SSL_MODES),
        "TLS as libpq's `sslmode`: `disable`, `prefer` (TLS when the server offers it), `require`, `verify-ca` (the certificate signed by a trusted CA), `verify-full` (and issued for the host)",
    )
    .default_value("prefer"),
    OptionDecl::new(
        "sslrootcert",
        Text,
        "PEM file of the CA certificates `verify-ca` and `verify-full` trust (default: the system's)",
    ),
    OptionDecl::new("dbtable", Text, "the table written, `name` or `schema.name`").required(),
    OptionDecl::new(
        "createTable",
        Bool,
        "create the table from the flow's columns when it does not exist (its primary key: the merge keys)",
    )
    .default_value("true"),
    OptionDecl::new(
        "progressTable",
        Text,
        "the table in which each query records its last committed batch, in the same transaction as the batch's rows (exactly once)",
    )
    .default_value("pipelines_sink_progress"),
]);

/// The PostgreSQL connector (a sink).
pub struct PostgresConnector;

/// The registered instance.
pub static POSTGRES: PostgresConnector = PostgresConnector;

inventory::submit! { ConnectorRegistration(&POSTGRES) }

impl Connector for PostgresConnector {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["postgresql"]
    }

    fn title(&self) -> &'static str {
        "PostgreSQL"
    }

    fn sink(&self) -> Option<&dyn SinkConnector> {
        Some(self)
    }
}

impl SinkConnector for PostgresConnector {
    fn rank(&self) -> u16 {
        5
    }

    fn options(&self) -> &'static OptionSet {
        &SINK_OPTIONS
    }

    /// Update mode upserts on the merge keys, or on the table's primary
    /// key when none are declared (checked when the sink opens).
    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        ALL_MODES
    }

    fn takes_merge_keys(&self) -> bool {
        true
    }

    /// Columns without a PostgreSQL type; then, when the server answers,
    /// the table's columns against the flow's ([`check_table`]).
    fn check_schema(&self, schema: &SchemaRef, options: &BTreeMap<String, String>) -> ColumnCheck {
        let untyped: Vec<(String, String)> = schema
            .fields()
            .iter()
            .filter(|f| ddl_type(f.data_type()).is_none())
            .map(|f| {
                (
                    format!(
                        "column `{}` is {}, which has no PostgreSQL column type here",
                        f.name(),
                        pipelines_core::plan::ddl::type_to_ddl(f.data_type())
                    ),
                    format!(
                        "select plain columns for the table, e.g. `{0}.start AS {0}_start` for a window, or `to_json({0})` as text",
                        f.name()
                    ),
                )
            })
            .collect();
        if !untyped.is_empty() {
            return untyped.into();
        }
        check_table(schema, &Options::merged(options, &BTreeMap::new(), ""))
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        let (_, tls) = connection_config(options)?;
        if let Some(path) = &tls.root_cert {
            crate::tls::check_root_cert(path)?;
        }
        options.bool("createTable", true)?;
        Ok(())
    }

    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(PostgresSink::open(ctx)?))
    }
}
