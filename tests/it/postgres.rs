//! The PostgreSQL sink against the local server (`PIPELINES_PG_URL`, which
//! scripts/test sets to its own role and database; else the `test`
//! database on 127.0.0.1:5432): seed 002's running count per key
//! upserted in update mode, append with `COPY`, complete mode, a batch
//! replayed after its database commit, and the errors of a wrong column
//! type and of a connection that fails. The tables are read back with
//! `psql`, independently of the sink.

use std::path::Path;
use std::process::Command;

use pipelines as dp;
use pipelines::engine::runtime::{inject_failure, run, RunOptions};
use pipelines::prelude::*;

fn url() -> String {
    std::env::var("PIPELINES_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Runs SQL with psql; returns its rows as `a|b` lines.
fn psql(sql: &str) -> Vec<String> {
    let out = Command::new("psql")
        .args([url().as_str(), "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .output()
        .expect("psql runs (PostgreSQL's client; scripts/test needs the local server)");
    assert!(
        out.status.success(),
        "psql failed on `{sql}`: {}\nstart the server: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// A table name of its own for each test (tests run concurrently).
fn fresh_table(name: &str) -> String {
    let t = format!("it_{name}");
    psql(&format!("DROP TABLE IF EXISTS {t}"));
    t
}

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::write(dir.join("in").join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

fn spec(dir: &Path) -> dp::spec::PipelineSpec {
    dp::spec::parse_str("name: pg\nstorage: ./storage\n", &dir.join("pipeline.yml")).unwrap()
}

fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("event_type STRING, n BIGINT")
        .option("maxFilesPerTrigger", "1")
        .load("in")
}

fn sink(p: dp::Pipeline, name: &str, table: &str, extra: &[(&str, &str)]) -> dp::Pipeline {
    let mut options = vec![
        ("url".to_string(), url()),
        ("dbtable".to_string(), table.to_string()),
    ];
    options.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p.create_sink(name, "postgres", options)
}

#[test]
fn update_mode_upserts_the_running_count_per_key() {
    let table = fresh_table("event_counts");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = sink(
        dp::Pipeline::new(),
        "event_counts_sink",
        &table,
        &[("merge_keys", "event_type")],
    )
    .update_flow("event_counts_flow", "event_counts_sink", |s: &Session| {
        events(s)?.group_by([col("event_type")]).count()
    });
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    write(
        dir,
        "1.json",
        &[
            r#"{"event_type":"click","n":1}"#,
            r#"{"event_type":"view","n":2}"#,
            r#"{"event_type":"click","n":3}"#,
        ],
    );
    write(
        dir,
        "2.json",
        &[
            r#"{"event_type":"click","n":4}"#,
            r#"{"event_type":"buy","n":5}"#,
        ],
    );
    let s = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(s.flows[0].batches, 2);
    let q = format!("SELECT event_type, count FROM {table} ORDER BY event_type");
    assert_eq!(psql(&q), ["buy|1", "click|3", "view|1"]);
    // The table was created with the merge key as its primary key.
    assert_eq!(
        psql(&format!(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '{table}'::regclass AND i.indisprimary"
        )),
        ["event_type"]
    );
    // A third batch updates one key; the replay of a batch committed in the
    // database (failure before the checkpoint commit) writes nothing twice.
    write(dir, "3.json", &[r#"{"event_type":"view","n":6}"#]);
    inject_failure("event_counts_flow", "before_commit", 2);
    assert!(run(&graph, &RunOptions::new(dir, dir.join("storage"))).is_err());
    assert_eq!(psql(&q), ["buy|1", "click|3", "view|2"]);
    let s = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!((s.flows[0].batches, s.flows[0].replayed), (1, 1));
    assert_eq!(psql(&q), ["buy|1", "click|3", "view|2"]);
}

#[test]
fn append_mode_copies_rows_and_complete_mode_replaces_them() {
    let appended = fresh_table("appended");
    let totals = fresh_table("totals");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = {
        let mut p = sink(dp::Pipeline::new(), "appended_sink", &appended, &[]);
        p = sink(p, "totals_sink", &totals, &[]);
        p.append_flow("copy_events", "appended_sink", |s: &Session| {
            events(s)?.select_expr(["event_type", "n", "n * 1.5 AS x", "n % 2 = 0 AS even"])
        })
        .append_flow("total_events", "totals_sink", |s: &Session| {
            events(s)?
                .group_by([col("event_type")])
                .agg([sum(col("n")).alias("total")])
        })
    };
    let spec = dp::spec::parse_str(
        "name: pg\nstorage: ./storage\nflows:\n  total_events:\n    options: { pipelines.outputMode: complete }\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    write(
        dir,
        "1.json",
        &[
            r#"{"event_type":"click","n":1}"#,
            r#"{"event_type":"view","n":2}"#,
        ],
    );
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    write(
        dir,
        "2.json",
        &[
            r#"{"event_type":"click","n":4}"#,
            r#"{"event_type":null,"n":null}"#,
        ],
    );
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(
        psql(&format!("SELECT coalesce(event_type, 'NULL'), coalesce(n::text, 'NULL'), coalesce(x::text, 'NULL'), coalesce(even::text, 'NULL') FROM {appended} ORDER BY 1, 2")),
        ["NULL|NULL|NULL|NULL", "click|1|1.5|false", "click|4|6|true", "view|2|3|true"]
    );
    assert_eq!(
        psql(&format!("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{appended}' ORDER BY ordinal_position")),
        ["event_type|text", "n|bigint", "x|double precision", "even|boolean"]
    );
    assert_eq!(
        psql(&format!("SELECT coalesce(event_type, 'NULL'), coalesce(total::text, 'NULL') FROM {totals} ORDER BY 1")),
        ["NULL|NULL", "click|5", "view|2"]
    );
    // Nothing new: nothing written again.
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(psql(&format!("SELECT count(*) FROM {appended}")), ["4"]);
}

fn run_error(p: dp::Pipeline, dir: &Path) -> String {
    let graph = p.build(&spec(dir)).map_err(|d| d.to_string()).unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage")))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_column_of_another_type_and_a_failed_connection_are_clear_errors() {
    let table = fresh_table("typed");
    psql(&format!("CREATE TABLE {table} (event_type DATE, n DATE)"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"event_type":"click","n":1}"#]);
    let typed = || {
        sink(dp::Pipeline::new(), "typed_sink", &table, &[]).append_flow(
            "typed_flow",
            "typed_sink",
            events,
        )
    };
    // Dry-run reads the table's columns: every mismatch, each with its fix.
    let problems: Vec<(String, String)> = typed()
        .build(&spec(dir))
        .expect_err("dry-run compares the columns")
        .iter()
        .map(|d| (d.message.clone(), d.help.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        problems,
        [
            (
                format!("writes to sink `typed_sink`: column `event_type` is STRING in the flow's output but date in table {table}"),
                "cast `event_type` in the flow's query to a type the column takes, or change the column's type to TEXT".to_string()
            ),
            (
                format!("writes to sink `typed_sink`: column `n` is BIGINT in the flow's output but date in table {table}"),
                "cast `n` in the flow's query to a type the column takes, or change the column's type to BIGINT".to_string()
            ),
        ]
    );
    // A table changed between dry-run and run: the sink's open says it.
    psql(&format!("DROP TABLE {table}"));
    let graph = typed()
        .build(&spec(dir))
        .map_err(|d| d.to_string())
        .unwrap();
    psql(&format!("CREATE TABLE {table} (event_type TEXT, n DATE)"));
    assert_eq!(
        run(&graph, &RunOptions::new(dir, dir.join("storage")))
            .unwrap_err()
            .to_string(),
        format!("sink `typed_sink`: column `n` is BIGINT in flow `typed_flow`'s output but date in table {table}\n  help: cast `n` in the flow's query to a type the column takes, or change the column's type to BIGINT")
    );
    let p = dp::Pipeline::new()
        .create_sink(
            "nowhere",
            "postgres",
            [
                ("url", "postgres://postgres@127.0.0.1:5432/no_such_database"),
                ("dbtable", "t"),
            ],
        )
        .append_flow("nowhere_flow", "nowhere", events);
    assert_eq!(
        run_error(p, dir),
        "sink `nowhere`: could not connect to PostgreSQL at postgres@127.0.0.1:5432/no_such_database: database \"no_such_database\" does not exist\n  help: check the database name, or create it"
    );
    let p = dp::Pipeline::new()
        .create_sink(
            "leaky",
            "postgres",
            [
                ("url", "postgres://postgres:hunter2@127.0.0.1:5432/test"),
                ("dbtable", "t"),
            ],
        )
        .append_flow("leaky_flow", "leaky", events);
    let graph = p
        .build(&spec(dir))
        .expect_err("dry-run refuses a password in the url")
        .to_string();
    assert!(
        graph.contains("sink `leaky` (tests/it/postgres.rs:")
            && graph.contains("): option `url` holds a password")
            && graph.contains("move it to the option `password: ${PGPASSWORD}`"),
        "{graph}"
    );
}

/// Against a server that checks passwords (scripts/test starts one:
/// `PIPELINES_PG_SCRAM_URL`, `PIPELINES_PG_SCRAM_PASSWORD`): a wrong
/// password is refused with the option to fix; the right one connects.
#[test]
fn a_wrong_password_is_a_clear_error() {
    let (Ok(url), Ok(right)) = (
        std::env::var("PIPELINES_PG_SCRAM_URL"),
        std::env::var("PIPELINES_PG_SCRAM_PASSWORD"),
    ) else {
        eprintln!("skipped: PIPELINES_PG_SCRAM_URL is not set (scripts/test sets it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"event_type":"click","n":1}"#]);
    let pipeline = |password: &str| {
        dp::Pipeline::new()
            .create_sink(
                "guarded",
                "postgres",
                [
                    ("url", url.as_str()),
                    ("password", password),
                    ("dbtable", "guarded_events"),
                ],
            )
            .append_flow("guarded_flow", "guarded", events)
    };
    let at = url.trim_start_matches("postgres://");
    assert_eq!(
        run_error(pipeline("wrong-password"), dir),
        format!("sink `guarded`: could not connect to PostgreSQL at {at}: password authentication failed for user \"postgres\"\n  help: check the password: the option `password` (write `${{PGPASSWORD}}` to read it from the environment)")
    );
    let graph = pipeline(&right)
        .build(&spec(dir))
        .map_err(|d| d.to_string())
        .unwrap();
    let s = run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    assert_eq!(s.flows[0].output_rows, 1);
}

/// The certificate of the local server (`ssl = on` in Debian's default
/// configuration: a self-signed certificate issued for `localhost`).
const SERVER_CERT: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// A table whose extra column records whether the sink's connection was
/// encrypted (a default the `COPY` leaves to the server).
fn tls_table(name: &str) -> String {
    let table = fresh_table(name);
    psql(
        "CREATE OR REPLACE FUNCTION it_connection_tls() RETURNS boolean LANGUAGE sql \
         AS 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'",
    );
    psql(&format!(
        "CREATE TABLE {table} (event_type TEXT, n BIGINT, tls BOOLEAN DEFAULT it_connection_tls())"
    ));
    table
}

/// `url` with its host replaced by `host`.
fn url_at(host: &str) -> String {
    url().replacen("127.0.0.1", host, 1)
}

#[test]
fn tls_modes_encrypt_and_check_the_certificate_as_libpq_does() {
    if !Path::new(SERVER_CERT).exists() {
        eprintln!("skipped: no {SERVER_CERT} (the local server's certificate)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"event_type":"click","n":1}"#]);
    let pipeline = |table: &str, options: &[(&str, &str)]| {
        let mut all = vec![("dbtable", table)];
        all.extend_from_slice(options);
        dp::Pipeline::new()
            .create_sink("tls_sink", "postgres", all)
            .append_flow("tls_flow", "tls_sink", events)
    };
    let ran = |table: &str, options: &[(&str, &str)]| {
        let graph = pipeline(table, options)
            .build(&spec(dir))
            .map_err(|d| d.to_string())
            .unwrap();
        let storage = tempfile::tempdir().unwrap();
        run(&graph, &RunOptions::new(dir, storage.path())).unwrap();
        psql(&format!("SELECT event_type, n, tls FROM {table}"))
    };
    let local = url_at("localhost");
    let loopback = url();
    let in_url = format!("{local}?sslmode=verify-full&sslrootcert={SERVER_CERT}");
    // (table, options, the row read back)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 6] = [
        ("tls_default", vec![("url", &loopback)], "click|1|t"),
        (
            "tls_disable",
            vec![("url", &loopback), ("sslmode", "disable")],
            "click|1|f",
        ),
        (
            "tls_require",
            vec![("url", &loopback), ("sslmode", "require")],
            "click|1|t",
        ),
        (
            "tls_verify_full",
            vec![
                ("url", &local),
                ("sslmode", "verify-full"),
                ("sslrootcert", SERVER_CERT),
            ],
            "click|1|t",
        ),
        // By address: the certificate is for `localhost`, but verify-ca
        // checks only who signed it.
        (
            "tls_verify_ca",
            vec![
                ("url", &loopback),
                ("sslmode", "verify-ca"),
                ("sslrootcert", SERVER_CERT),
            ],
            "click|1|t",
        ),
        ("tls_in_url", vec![("url", &in_url)], "click|1|t"),
    ];
    for (name, options, expected) in &cases {
        let table = tls_table(name);
        assert_eq!(ran(&table, options), [*expected], "{name}");
    }
    let at = loopback.trim_start_matches("postgres://");
    let table = tls_table("tls_wrong_host");
    assert_eq!(
        run_error(
            pipeline(
                &table,
                &[
                    ("url", &loopback),
                    ("sslmode", "verify-full"),
                    ("sslrootcert", SERVER_CERT)
                ]
            ),
            dir
        ),
        format!("sink `tls_sink`: could not connect to PostgreSQL at {at} (sslmode verify-full): error performing TLS handshake: invalid peer certificate: certificate not valid for name \"127.0.0.1\"; certificate is only valid for DnsName(\"localhost\")\n  help: the server's certificate is not issued for `127.0.0.1`: connect by the name it was issued for, or set `sslmode: verify-ca` to check only who signed it")
    );
    let other_ca = "/etc/ssl/certs/ISRG_Root_X1.pem";
    if Path::new(other_ca).exists() {
        assert_eq!(
            run_error(
                pipeline(
                    &table,
                    &[
                        ("url", &local),
                        ("sslmode", "verify-full"),
                        ("sslrootcert", other_ca)
                    ]
                ),
                dir
            ),
            format!("sink `tls_sink`: could not connect to PostgreSQL at {} (sslmode verify-full): error performing TLS handshake: invalid peer certificate: UnknownIssuer\n  help: the server's certificate is not signed by a CA in {other_ca}: point `sslrootcert` at the CA that signed it", local.trim_start_matches("postgres://"))
        );
    }
    // Dry-run: a mode that does not exist, a root file that does not.
    let refused = |options: &[(&str, &str)]| {
        pipeline(&table, options)
            .build(&spec(dir))
            .expect_err("dry-run refuses it")
            .iter()
            .map(|d| format!("{} / {}", d.message, d.help.clone().unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        refused(&[("url", &loopback), ("sslmode", "always")]),
        ["option `sslmode` is `always`, not a TLS mode / use one of disable, prefer, require, verify-ca, verify-full"]
    );
    assert_eq!(
        refused(&[
            ("url", &loopback),
            ("sslmode", "verify-full"),
            ("sslrootcert", "/no/such/ca.pem")
        ]),
        ["option `sslrootcert`: cannot read /no/such/ca.pem: No such file or directory (os error 2) / point `sslrootcert` at a PEM file of the CA certificates to trust"]
    );
}

/// `sslmode: require` against a server without TLS (the password-checking
/// one scripts/test starts has `ssl = off`).
#[test]
fn require_against_a_server_without_tls_says_so() {
    let (Ok(url), Ok(password)) = (
        std::env::var("PIPELINES_PG_SCRAM_URL"),
        std::env::var("PIPELINES_PG_SCRAM_PASSWORD"),
    ) else {
        eprintln!("skipped: PIPELINES_PG_SCRAM_URL is not set (scripts/test sets it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "1.json", &[r#"{"event_type":"click","n":1}"#]);
    let p = dp::Pipeline::new()
        .create_sink(
            "plain",
            "postgres",
            [
                ("url", url.as_str()),
                ("password", password.as_str()),
                ("sslmode", "require"),
                ("dbtable", "plain_events"),
            ],
        )
        .append_flow("plain_flow", "plain", events);
    let at = url.trim_start_matches("postgres://");
    assert_eq!(
        run_error(p, dir),
        format!("sink `plain`: could not connect to PostgreSQL at {at} (sslmode require): error performing TLS handshake: server does not support TLS\n  help: the server does not offer TLS: enable `ssl` on the server, or set `sslmode: prefer` (or `disable`)")
    );
}

/// A server that does not answer at dry-run is a warning (the run connects
/// again, and stops there); a table it can read is checked column by
/// column (see above).
#[test]
fn an_unreachable_server_at_dry_run_is_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("pipeline.yml"), "name: pg\nstorage: ./storage\n").unwrap();
    write(dir, "1.json", &[r#"{"event_type":"click","n":1}"#]);
    let down = || {
        dp::Pipeline::new()
            .create_sink(
                "down",
                "postgres",
                [
                    ("url", "postgres://pipelines@127.0.0.1:1/db"),
                    ("dbtable", "t"),
                ],
            )
            .append_flow("down_flow", "down", events)
    };
    let (code, out, err) = crate::sql::cli(down(), dir, &["dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    let (origin, rest) = err
        .strip_prefix("warning: flow `down_flow` (")
        .and_then(|e| e.split_once("): "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(origin.starts_with("tests/it/postgres.rs:"), "{err}");
    assert_eq!(
        rest,
        "writes to sink `down`: table t not checked against the flow's columns: could not connect to PostgreSQL at pipelines@127.0.0.1:1/db: error connecting to server: Connection refused (os error 111) (the run connects again, and stops if it cannot)\n"
    );
    assert!(out.contains("down_flow"), "{out}");
    let (code, _, err) = crate::sql::cli(down(), dir, &["run"]);
    assert_eq!(code, 1);
    assert!(
        err.ends_with("error: sink `down`: could not connect to PostgreSQL at pipelines@127.0.0.1:1/db: error connecting to server: Connection refused (os error 111)\n  help: check that the server runs and `url` (or `host`, `port`, `database`, `user`) points at it\n"),
        "{err}"
    );
}
