"""Protocol traces of `spark-pipelines run` against a local Spark Connect
server: every gRPC call the Python client makes (request, metadata,
every streamed response, errors with their status details) in protobuf
text format.

    $HOME/.cache/pipelines-venv/bin/python tests/spark/connect/trace.py [--only NAME]...

NAME is python_project, sql_project or errors (default: all). Writes
trace/python_project.txt, trace/sql_project.txt and trace/errors.txt.

How: the pipelines CLI (pyspark.pipelines.cli.main) runs in a child
Python process (`trace.py --child OUT`) whose
pyspark.sql.connect.proto.base_pb2_grpc.SparkConnectServiceStub is
wrapped, so each RPC of the real client is logged as it is sent and
answered; grpc.insecure_channel is wrapped to log the channel options.
`spark-pipelines` itself is a JVM launcher (SparkPipelines) around that
same cli.py; in-process, SPARK_REMOTE=sc://... stands for its --remote.
Arrow batch payloads are elided to their size, and the server stack
traces in FetchErrorDetails responses to their count.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "trace")


# ---------------------------------------------------------------- tracer


def install_tracer(path):
    import grpc
    from google.protobuf import text_format
    from pyspark.sql.connect.proto import base_pb2_grpc

    out = open(path, "w", buffering=1)
    lock = threading.Lock()
    t0 = time.monotonic()
    seq = [0]

    def fmt(msg):
        from pyspark.sql.connect.proto import base_pb2

        if isinstance(msg, base_pb2.ExecutePlanResponse) and msg.HasField("arrow_batch"):
            m = base_pb2.ExecutePlanResponse()
            m.CopyFrom(msg)
            m.arrow_batch.data = f"<{len(msg.arrow_batch.data)} bytes of Arrow IPC elided>".encode()
            msg = m
        if isinstance(msg, base_pb2.FetchErrorDetailsResponse):
            m = base_pb2.FetchErrorDetailsResponse()
            m.CopyFrom(msg)
            notes = []
            for i, e in enumerate(m.errors):
                if len(e.stack_trace):
                    notes.append(f"# errors[{i}]: {len(e.stack_trace)} stack_trace elements elided")
                    del e.stack_trace[:]
            return text_format.MessageToString(m, as_utf8=True) + "".join(n + "\n" for n in notes)
        return text_format.MessageToString(msg, as_utf8=True)

    def write(text):
        with lock:
            out.write(text)

    def stamp():
        return f"+{time.monotonic() - t0:.3f}s"

    def status_details(err):
        lines = [f"grpc status: {err.code()}", f"grpc details: {err.details()}"]
        try:
            from grpc_status import rpc_status

            st = rpc_status.from_call(err)
        except Exception as e:  # noqa: BLE001
            st = None
            lines.append(f"(no google.rpc.Status: {e})")
        if st is not None:
            from google.rpc import error_details_pb2

            lines.append(f"google.rpc.Status code={st.code} message={st.message!r}")
            for d in st.details:
                for cls in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo, error_details_pb2.DebugInfo):
                    if d.Is(cls.DESCRIPTOR):
                        info = cls()
                        d.Unpack(info)
                        lines.append(f"  detail {cls.__name__}:\n" + textwrap.indent(text_format.MessageToString(info, as_utf8=True), "    "))
                        break
                else:
                    lines.append(f"  detail {d.type_url}")
        try:
            md = err.trailing_metadata() or ()
            keys = [k for k, _ in md if not k.endswith("-bin")]
            if keys:
                lines.append("trailing metadata: " + ", ".join(f"{k}={v}" for k, v in md if k in keys))
        except Exception:  # noqa: BLE001
            pass
        return "\n".join(lines) + "\n"

    def summary(req):
        """A one-line label: the RPC's command or plan kind."""
        try:
            if req.DESCRIPTOR.name == "ExecutePlanRequest":
                plan = req.plan
                if plan.HasField("command"):
                    cmd = plan.command
                    kind = cmd.WhichOneof("command_type")
                    if kind == "pipeline_command":
                        return f"Command.pipeline_command.{cmd.pipeline_command.WhichOneof('command_type')}"
                    return f"Command.{kind}"
                return f"Plan.root.{plan.root.WhichOneof('rel_type')}"
            if req.DESCRIPTOR.name == "AnalyzePlanRequest":
                return f"AnalyzePlan.{req.WhichOneof('analyze')}"
            if req.DESCRIPTOR.name == "ConfigRequest":
                return f"Config.{req.operation.WhichOneof('op_type')}"
        except Exception:  # noqa: BLE001
            pass
        return req.DESCRIPTOR.name

    def log_request(name, req, kw):
        seq[0] += 1
        n = seq[0]
        md = kw.get("metadata")
        write(
            f"\n=== #{n} {stamp()} {name} request [{summary(req)}] (thread {threading.current_thread().name})\n"
            f"call metadata: {list(md) if md else []}\n{fmt(req)}"
        )
        return n

    def wrap_unary(name, fn):
        def call(req, *a, **kw):
            n = log_request(name, req, kw)
            try:
                resp = fn(req, *a, **kw)
            except grpc.RpcError as e:
                write(f"--- #{n} {stamp()} {name} ERROR\n{status_details(e)}")
                raise
            write(f"--- #{n} {stamp()} {name} response\n{fmt(resp)}")
            return resp

        return call

    def wrap_stream(name, fn):
        def call(req, *a, **kw):
            n = log_request(name, req, kw)
            it = fn(req, *a, **kw)

            def gen():
                i = 0
                try:
                    for resp in it:
                        i += 1
                        write(f"--- #{n} {stamp()} {name} response {i}\n{fmt(resp)}")
                        yield resp
                except grpc.RpcError as e:
                    write(f"--- #{n} {stamp()} {name} ERROR after {i} responses\n{status_details(e)}")
                    raise
                write(f"--- #{n} {stamp()} {name} end of stream after {i} responses\n")

            return gen()

        return call

    orig_init = base_pb2_grpc.SparkConnectServiceStub.__init__

    def init(self, channel):
        orig_init(self, channel)
        for attr, v in list(vars(self).items()):
            if isinstance(v, grpc.UnaryStreamMultiCallable):
                setattr(self, attr, wrap_stream(attr, v))
            elif isinstance(v, grpc.UnaryUnaryMultiCallable):
                setattr(self, attr, wrap_unary(attr, v))
            elif isinstance(v, (grpc.StreamUnaryMultiCallable, grpc.StreamStreamMultiCallable)):
                pass  # AddArtifacts: client streaming, not used by pipelines

    base_pb2_grpc.SparkConnectServiceStub.__init__ = init

    orig_channel = grpc.insecure_channel

    def insecure_channel(target, options=None, *a, **kw):
        write(f"\n=== {stamp()} grpc.insecure_channel(target={target!r}, options={options!r})\n")
        return orig_channel(target, options, *a, **kw)

    grpc.insecure_channel = insecure_channel
    return write


def child(out_path, args):
    """Run the pipelines CLI in this process with the tracer installed."""
    write = install_tracer(out_path)
    write(f"# spark-pipelines {' '.join(args)} in {os.getcwd()} with SPARK_REMOTE={os.environ.get('SPARK_REMOTE')}\n")
    sys.argv = ["spark-pipelines", *args]
    from pyspark.pipelines import cli

    try:
        cli.main()
    except BaseException as e:
        write(f"\n# CLI raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n")
        raise
    write("\n# CLI returned normally\n")


# ---------------------------------------------------------------- driver

ERROR_CASES = [
    (
        "a1",
        "A Python flow whose query reads a table that exists nowhere (DefineFlow is accepted; StartRun fails).",
        {"transformations/bad.py": '''
from pyspark import pipelines as dp

@dp.table
def reads_missing():
    return spark.readStream.table("no_such_table")  # noqa: F821
'''},
    ),
    (
        "a2",
        "The same in SQL: a materialized view over a table that exists nowhere.",
        {"transformations/bad.sql": "CREATE MATERIALIZED VIEW mv_reads_missing AS SELECT * FROM no_such_table;\n"},
    ),
    (
        "b1",
        "DefineFlow whose relation is WithWatermark over a pipeline dataset that is defined only later.",
        {"transformations/bad.py": '''
from pyspark import pipelines as dp

@dp.table
def watermarked():
    return spark.readStream.table("defined_later").withWatermark("ts", "1 minute")  # noqa: F821

@dp.table
def defined_later():
    return spark.readStream.format("rate").load()  # noqa: F821
'''},
    ),
    (
        "b2",
        "DefineFlow whose relation is WithWatermark over a pipeline dataset defined just before it (not yet a catalog table).",
        {"transformations/bad.py": '''
from pyspark import pipelines as dp

@dp.table
def defined_first():
    return spark.readStream.format("rate").load()  # noqa: F821

@dp.table
def watermarked_after():
    return spark.readStream.table("defined_first").withWatermark("timestamp", "1 minute")  # noqa: F821
'''},
    ),
    (
        "b3",
        "Not an error: the flow of b2, once a first run has made its upstream a catalog table. "
        "The first run (not traced) defines only clicks_once; this second run's DefineFlow with "
        "WithWatermark over it is accepted and the run completes.",
        {"transformations/ok.py": '''
import os
from pyspark import pipelines as dp

@dp.table
def clicks_once():
    return (spark.readStream.format("json")  # noqa: F821
            .schema("click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING")
            .load(os.path.join(os.environ["CONNECT_TEST_DATA"], "clicks")))

if os.environ.get("B3_SECOND_RUN"):
    @dp.table
    def clicks_once_watermarked():
        return spark.readStream.table("clicks_once").withWatermark("ts", "1 minute")  # noqa: F821
'''},
    ),
    (
        "c1",
        "A SQL file with a syntax error.",
        {"transformations/bad.sql": "CREATE STREAMING TABLE broken AS SELEC * FROM STREAM(somewhere);\n"},
    ),
    (
        "c2",
        "A SQL file with a statement pipelines do not accept (CREATE TABLE).",
        {"transformations/bad.sql": "CREATE TABLE plain_table (id INT) USING parquet;\n"},
    ),
    (
        "d1",
        "A flow that resolves but fails while it runs (ANSI cast error in a materialized view).",
        {"transformations/bad.sql": "CREATE MATERIALIZED VIEW fails_at_runtime AS\nSELECT CAST(v AS INT) AS x FROM VALUES ('not a number') AS t(v);\n"},
    ),
]

SPEC = """name: {name}
storage: file://{storage}
configuration:
  spark.sql.shuffle.partitions: "2"
libraries:
  - glob:
      include: transformations/**
"""


def run_child(project_dir, url, out_path, data_dir, args=("run",)):
    env = dict(os.environ, SPARK_REMOTE=url, SPARK_LOCAL_IP="127.0.0.1", TZ="UTC", PYTHONUNBUFFERED="1", CONNECT_TEST_DATA=data_dir)
    p = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", out_path, "--", *args],
        cwd=project_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    with open(out_path, "a") as f:
        f.write(f"\n# ---- CLI output (exit {p.returncode}) ----\n")
        f.write(strip_traceback(p.stdout))
    return p.returncode, p.stdout


def strip_traceback(text):
    """Keep the CLI's own lines and the final exception, drop stack frames."""
    keep = []
    for line in text.splitlines():
        if re.match(r"\s+File \"|\s{4}\S|Traceback|\s+\^", line):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--only", action="append", choices=["python_project", "sql_project", "errors"])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.child:
        rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
        return child(args.child, rest or ["run"])

    sys.path.insert(0, HERE)
    import shutil

    import projects
    from server import SparkConnectServer

    only = args.only or ["python_project", "sql_project", "errors"]
    os.makedirs(TRACE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="connect-trace-")
    data = projects.copy_data(os.path.join(tmp, "data"))
    with SparkConnectServer(os.path.join(tmp, "warehouse"), log_path=os.path.join(tmp, "server.log")) as srv:
        print(f"server {srv.url} up after {srv.startup_seconds:.1f} s", flush=True)
        # Python project in the default database, SQL project in its own.
        for name, db in (("python_project", None), ("sql_project", "sql_project")):
            if name not in only:
                continue
            root = os.path.join(tmp, name)
            os.makedirs(root)
            pdir = projects.assemble(name, root, data, database=db)
            if db or os.path.isdir(os.path.join(pdir, "setup")):
                spark = projects.remote_session(srv.url)
                projects.run_setup(spark, pdir, db)
                spark.stop()
            out = os.path.join(TRACE, f"{name}.txt")
            rc, _ = run_child(pdir, srv.url, out, data)
            relativize(out, tmp)
            prepend_summary(out)
            print(f"{name}: exit {rc}, trace {out}", flush=True)
        if "errors" in only:
            parts = [ERRORS_HEADER]
            for case, what, files in ERROR_CASES:
                pdir = os.path.join(tmp, f"error-{case}")
                for rel, text in files.items():
                    os.makedirs(os.path.dirname(os.path.join(pdir, rel)), exist_ok=True)
                    with open(os.path.join(pdir, rel), "w") as f:
                        f.write(text.lstrip())
                with open(os.path.join(pdir, "spark-pipeline.yml"), "w") as f:
                    f.write(SPEC.format(name=f"error_{case}", storage=os.path.join(pdir, "storage")))
                out = os.path.join(tmp, f"error-{case}.txt")
                if case == "b3":
                    rc, _ = run_child(pdir, srv.url, out + ".first", data)
                    print(f"case b3 first run: exit {rc}", flush=True)
                    os.environ["B3_SECOND_RUN"] = "1"
                try:
                    rc, _ = run_child(pdir, srv.url, out, data)
                finally:
                    os.environ.pop("B3_SECOND_RUN", None)
                relativize(out, tmp)
                with open(out) as f:
                    trace = f.read()
                parts.append(error_section(case, what, files, rc, trace))
                print(f"error case {case}: exit {rc}", flush=True)
            with open(os.path.join(TRACE, "errors.txt"), "w") as f:
                f.write("\n".join(parts))
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


ERRORS_HEADER = """Errors Spark 4.3's Spark Connect server returns for broken pipelines,
traced by tests/spark/connect/trace.py (each case: its files, then the
failing RPC with its gRPC status and google.rpc.Status details, a summary
of the RPCs and pipeline events, then the whole trace of that CLI run).
Every error came back as gRPC status INTERNAL (13); the error class is in
the ErrorInfo metadata (errorClass, sqlState, messageParameters) when the
exception has one, and FetchErrorDetails(error_id) returns the rest.
"""


EVENT = re.compile(r'pipeline_event_result \{\n  event \{\n    timestamp \{[^}]*\}\n    message: "((?:[^"\\]|\\.)*)"')


def blocks(trace):
    """(kind, n, name, header, body) for each === request / --- response block."""
    out = []
    for m in re.finditer(r"^(===|---) #(\d+) (\S+) (\w+) ([^\n]*)\n(.*?)(?=^(?:===|---|#) |\Z)", trace, re.S | re.M):
        out.append((m.group(1), int(m.group(2)), m.group(4), m.group(5), m.group(6)))
    return out


def summarize(trace):
    """One line per RPC except ReleaseExecute: what was sent, what came back;
    then the pipeline event messages in order."""
    reqs, resps = {}, {}
    for kind, n, name, header, body in blocks(trace):
        if kind == "===":
            label = re.search(r"\[([^\]]*)\]", header)
            reqs[n] = (name, label.group(1) if label else "?")
        else:
            resps.setdefault(n, []).append((header, body))
    lines = []
    for n in sorted(reqs):
        name, label = reqs[n]
        if name == "ReleaseExecute":
            continue
        kinds, outcome = [], ""
        for header, body in resps.get(n, []):
            if header.startswith("ERROR"):
                code = re.search(r"grpc status: (\S+)", body)
                cls = re.search(r'key: "errorClass"\n\s*value: "([^"]*)"', body)
                reason = re.search(r'reason: "([^"]*)"', body)
                outcome = f" -> ERROR {code.group(1) if code else '?'} " + (cls.group(1) if cls else (reason.group(1) if reason else ""))
            elif header.startswith("end of stream"):
                pass
            else:
                k = re.search(r"^(\w+) \{", body, re.M)
                kinds.append(k.group(1) if k else "(no payload)")
        counted = []
        for k in dict.fromkeys(kinds):
            c = kinds.count(k)
            counted.append(f"{k} x{c}" if c > 1 else k)
        lines.append(f"#{n:<4} {name:<18} {label:<60} -> {', '.join(counted) or '(nothing)'}{outcome}")
    events = [e.encode().decode("unicode_escape") for e in EVENT.findall(trace)]
    return (
        "RPCs in order (ReleaseExecute calls of the reattachable executions left out; payload kinds of the responses):\n"
        + "\n".join("  " + line for line in lines)
        + "\n\nPipeline event messages, in order:\n"
        + ("\n".join("  " + e.replace("\n", "\n    ") for e in events) if events else "  (none)")
        + "\n"
    )


def error_section(case, what, files, rc, trace):
    src = "".join(f"--- {rel}\n{text.lstrip()}" for rel, text in files.items())
    failing = []
    for kind, n, name, header, body in blocks(trace):
        if kind == "---" and header.startswith("ERROR"):
            req = re.search(rf"=== #{n} \S+ \w+ request \[([^\]]*)\]", trace)
            failing.append(f"RPC #{n} {name} [{req.group(1) if req else '?'}] {header}\n{body.rstrip()}")
    summary = "\n\n".join(failing) if failing else "(no RPC failed)"
    return (
        f"\n{'#' * 72}\n# case {case}: {what}\n{'#' * 72}\n{src}\n"
        f"CLI exit status: {rc}\n\nFailing RPC(s):\n{textwrap.indent(summary, '  ')}\n\n"
        f"{summarize(trace)}\nFull trace:\n{trace}"
    )


def prepend_summary(path):
    with open(path) as f:
        trace = f.read()
    with open(path, "w") as f:
        f.write("# SUMMARY\n" + summarize(trace) + "\n# FULL TRACE\n" + trace)


def relativize(path, tmp):
    """Replace the temporary directory in a trace by <tmp>."""
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace(tmp, "<tmp>"))


if __name__ == "__main__":
    sys.exit(main())
