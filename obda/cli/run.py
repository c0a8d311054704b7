"""``obda run``: a continuous query over the project's sources, its answers to the console, a file, a folder or
Kafka, resumable from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from obda.cli.common import FORGET_AFTER_OPTION, MAX_MEMBERS_OPTION, OutputFormat, _fail, _load_project, app, err
from obda.errors import ObdaError


def _byte_size(text: str) -> int:
    """``256M``, ``1G``, ``64k`` or a plain number of bytes (a clear error otherwise)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in "KMG" else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a size (e.g. 256M, 1G, 500000)", param_hint="--max-bytes-per-batch")
    if value < 1:
        raise typer.BadParameter("must be at least 1 byte", param_hint="--max-bytes-per-batch")
    return int(value * units[unit])


def _shed_option(max_lag: str | None, policy: str):
    """``--shed-max-lag`` / ``--shed-policy`` as a shedding setting (None: nothing is ever dropped)."""
    if max_lag is None:
        return None
    from obda.execution.shedding import Shed

    try:
        return Shed.parse({"max_lag": max_lag, "policy": policy})
    except ObdaError as e:
        raise typer.BadParameter(e.message, param_hint="--shed-max-lag / --shed-policy")


#: what a failed run with --checkpoint can do (obda.execution.checkpoint.is_state_fault: not for a failure of the
#: checkpoint itself)
_RESUME_HINT = ("; once the cause is fixed, run the same command again (same --checkpoint): it resumes from "
                "the last committed micro-batch, every answer once")


@app.command()
def run(
    query: Path = typer.Argument(..., help="SPARQL query file (.rq)", exists=True, dir_okay=False),
    project: Path = typer.Option(..., "--project", "-p", help="project folder"),
    until_exhausted: bool = typer.Option(False, "--until-exhausted", help="process the current files to the end, close the last timestamp, exit"),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="JSON-lines file for the answers (default or -: console; written afresh unless "
                                     "--checkpoint continues a run), or a Kafka topic: "
                                     "kafka://host:port/topic (records keyed <query file name>:<line number>)"),
    output_dir: Optional[Path] = typer.Option(
        None, "--output-dir", file_okay=False,
        help="folder for the answers instead: part files published by an atomic commit log "
             "(data/, _commits/; exactly once with --checkpoint)"),
    output_format: Optional[OutputFormat] = typer.Option(
        None, "--format", "-f", help="part files of --output-dir: json (JSON lines, default) or parquet"),
    max_files_per_batch: Optional[int] = typer.Option(
        None, "--max-files-per-batch", min=1, help="at most this many new files per stream in one micro-batch"),
    max_bytes_per_batch: Optional[str] = typer.Option(
        None, "--max-bytes-per-batch",
        help="at most this many bytes of new files in one micro-batch, e.g. 256M (default), 1G, 500000 "
             "(at least one file per stream): a backlog is processed in bounded steps"),
    master: Optional[str] = typer.Option(None, "--master", envvar="OBDA_SPARK_MASTER", help="Spark master URL (default local[*])"),
    conf: Optional[List[str]] = typer.Option(
        None, "--conf", help="a Spark setting key=value, e.g. --conf spark.driver.memory=2g (repeatable; "
                             "$SPARK_CONF_DIR/spark-defaults.conf is read too, --conf wins)"),
    allow_unbounded: bool = typer.Option(False, "--allow-unbounded", help="also run members not shown bounded (state grows; reported)"),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="checkpoint folder: a restarted run continues exactly once"),
    idle_timeout: Optional[float] = typer.Option(None, "--idle-timeout", help="seconds without rows after which a stream stops holding back the marker"),
    backend: str = typer.Option("spark", help="spark, or local (pipelines in Python: small inputs, no JVM)"),
    max_members: Optional[int] = MAX_MEMBERS_OPTION,
    wait_for_data: bool = typer.Option(False, "--wait-for-data", help="a stream location that does not exist yet is a warning (its files are read once it exists), not an error"),
    final: Optional[Path] = typer.Option(
        None, "--final", dir_okay=False,
        help="aggregate queries, with --until-exhausted: also write the final answer table here (one JSON object "
             "per row, in ORDER BY order)"),
    shed_max_lag: Optional[str] = typer.Option(
        None, "--shed-max-lag", help="opt-in load shedding: input files that waited longer than this (PT5M, or "
                                     "seconds) are dropped unread, every dropped row counted in the quarantine and "
                                     "the metrics (shed, incomplete_since); without it nothing is dropped"),
    shed_policy: str = typer.Option("drop_oldest", "--shed-policy", help="with --shed-max-lag: drop_oldest"),
    forget_after: Optional[float] = FORGET_AFTER_OPTION,
) -> None:
    """Run a query continuously over the project's streams, in application-time order.

    Each answer is one JSON line {"emitted_at": ..., "binding": {...}}; late and
    invalid rows go to <checkpoint>/quarantine.jsonl with a reason. A query
    that is not shown bounded needs --allow-unbounded.

    With --output-dir DIR the answers go to part files: DIR/data/batch-<n>-part-<i>.json (or
    .parquet), published per micro-batch by DIR/_commits/<n>.json once the checkpoint covers
    them; read only the files a commit file lists.

    An aggregate query (GROUP BY, COUNT, SUM, AVG, MIN, MAX, SAMPLE) writes a changelog instead:
    {"emitted_at": ..., "op": "upsert" | "delete", "binding": {...}} per group whose row changed
    at a closed timestamp; --final FILE also writes the answer table at the end of the input.

    Examples:
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output-dir answers --format parquet --checkpoint ckpt
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output-dir answers --max-bytes-per-batch 64M
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl --conf spark.driver.memory=2g
      obda run demo/queries/readings_per_sensor.rq --project demo --until-exhausted --output changelog.jsonl --final answer.jsonl
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl --checkpoint ckpt --shed-max-lag PT5M
    """
    from obda.analysis import analyze_query, plan_execution
    from obda.errors import ExecutionError, failure_text
    from obda.execution import ConsoleSink, ContinuousQuery, DirectorySink, JsonLinesSink
    from obda.execution.checkpoint import is_state_fault
    from obda.execution.spark_io import parse_conf
    from obda.execution.aggregate import TIME_KEYED_TABLE

    if output is not None and output_dir is not None:
        raise typer.BadParameter("give either --output FILE or --output-dir DIR, not both", param_hint="--output-dir")
    if output_format is not None and output_dir is None:
        raise typer.BadParameter("--format chooses the part files of --output-dir; give --output-dir DIR too",
                                 param_hint="--format")
    if final is not None and not until_exhausted:
        raise typer.BadParameter("--final writes the answer table at the end of the input; give --until-exhausted too",
                                 param_hint="--final")
    try:
        proj = _load_project(project)
        comp = proj.compile_file(query, max_members)
        if final is not None and comp.aggregation is None:
            raise typer.BadParameter(f"{query}: --final writes the answer table of an aggregate query; the answers "
                                     "of this query are the output itself", param_hint="--final")
        report = analyze_query(comp, proj.sources)
        if final is not None and getattr(report, "time_keyed", False):
            raise typer.BadParameter(f"{query}: {TIME_KEYED_TABLE}", param_hint="--final")
        if output_dir is not None:
            sink = DirectorySink(output_dir, (output_format or OutputFormat.json).value)
        else:
            from obda.execution.kafka_sink import KafkaSink, is_kafka_url

            if output is not None and is_kafka_url(output):  # at least once, keyed: README "The Kafka sink"
                sink = KafkaSink(str(output), query.stem, checkpoint / "kafka-sink" if checkpoint else None)
            else:
                if output and str(output) != "-" and Path(output).is_dir():
                    raise typer.BadParameter(f"{output} is a folder: --output writes one file of answer lines; give "
                                             "a file path, or --output-dir FOLDER for a folder of parts",
                                             param_hint="--output")
                sink = JsonLinesSink(output) if output and str(output) != "-" else ConsoleSink()  # -: the console
        cq = ContinuousQuery(
            plan_execution(comp, proj.sources, report), base_dir=proj.directory, sink=sink, checkpoint_dir=checkpoint,
            allow_unbounded=allow_unbounded, idle_timeout=idle_timeout, master=master, backend=backend,
            spark_conf=parse_conf(conf), max_files_per_batch=max_files_per_batch,
            shed=_shed_option(shed_max_lag, shed_policy), forget_after=forget_after,
            **({"max_bytes_per_batch": _byte_size(max_bytes_per_batch)} if max_bytes_per_batch else {}),
        )
        from obda.model.sources import missing_locations_error, missing_stream_locations

        missing = missing_stream_locations(cq.plan.stream_tables(), proj.directory)
        if missing:
            e = missing_locations_error(missing, "create it, fix 'location' in the sources file, or pass "
                                                 "--wait-for-data to wait for it")
            if not wait_for_data:
                cq.close()
                raise e
            err.print(f"[yellow]warning[/]: {e.location}: {e.message.split('; ')[0]}; waiting for it (--wait-for-data)",
                      highlight=False)
        cq.open()  # static tables, checkpoint: refused here, before the verdict line
    except ObdaError as e:
        _fail(e)
    under = getattr(report, "constrained_verdict", report.verdict)
    used = ", ".join(getattr(report, "constraints_used", ()))
    err.print(f"verdict: {report.verdict}" + (f" ({under} under the k-constraints {used}: watched, violations "
                                               "quarantined)" if under != report.verdict and used else "")
              + f"; running {query.name} ({'until exhausted' if until_exhausted else 'Ctrl-C stops'})")
    try:
        if until_exhausted:
            metrics = cq.run_until_exhausted()
            if final is not None:
                from obda.execution.sinks import row_lines

                final.write_text("".join(line + "\n" for line in row_lines(cq.answer(), cq.columns)), encoding="utf-8")
        else:
            import time as _time

            cq.start()
            try:
                while cq.running:
                    _time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            cq.stop()
            if cq.error:
                raise cq.error
            metrics = cq.metrics
    except ObdaError as e:
        if checkpoint is not None and type(e) is ExecutionError and not is_state_fault(e) and "resume" not in e.message:
            e = ExecutionError(e.message + _RESUME_HINT, e.location)
        _fail(e)
    except Exception as e:  # noqa: BLE001 - a disk, a folder, a bug: typed, with what to do, never a traceback
        _fail(ExecutionError(f"the query failed: {failure_text(e)}; nothing of the micro-batch it was in was "
                             "committed" + (_RESUME_HINT if checkpoint is not None else
                                            "; a new run starts from the first file again (with --checkpoint it "
                                            "would resume from the last committed micro-batch)")))
    finally:
        close = getattr(cq, "close", None)
        if close:
            close()
    err.print(json.dumps(metrics.to_dict(), default=str), highlight=False)
