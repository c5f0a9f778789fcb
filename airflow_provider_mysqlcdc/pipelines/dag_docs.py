"""What the pipeline DAGs' *Docs* tab says, and the same words on the docs site.

A user reads how to start a load, rerun a batch or reset a pipeline in two places: the DAG page's
*Docs* in the Airflow UI (``doc_md``) and ``docs/ui.md``. Both come from the blocks below, so they
cannot disagree (once they did: the Docs tab said a finished batch could not be cleared while
streaming long after it could). ``python -m mysqlcdc_harness.reference`` writes each block into
the docs page between ``<!-- dag-docs:NAME -->`` and ``<!-- /dag-docs:NAME -->``, rendered with
the DAG template's own defaults (``GENERIC``); ``--check`` fails when a page's copy differs.

The blocks are ``str.format`` templates: ``{loads}`` (the tables), ``{sink}`` (the sink, in words),
``{watchdog_dag_id}`` and ``{dag_id}``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

START = """\
**Start a load:** *Trigger* (top right), fill the **Source** section (connection, tables) and
press *Trigger*. The defaults load {loads} into {sink}.

1. **validate** checks the server (binlog ROW / FULL image, privileges, time zone, version)
   and the table list: every entry that matches no table, and tables without a key, are named
   with the fix. It fails at once, without retries.
2. **plan** splits the tables into chunks and groups them into batches (millions of rows each);
   its log shows a table of the batches. Kept in the *State location*: a new run of the DAG
   reuses the plan and skips finished batches.
3. **snapshot** runs one Spark job per batch; each map index is named after its tables, chunks
   and estimated rows. Its log shows progress every 20 s and a summary.
4. **stream** starts the long-lived binlog stream from the minimum high watermark and returns
   once it has committed its first micro-batch. The stream then runs outside this DAG run:
   the **{watchdog_dag_id}** DAG checks it every 5 minutes (alive, lag, last commit,
   the tail of its log), relaunches it if it died, and records its health as an Asset event.
"""

RERUN = """\
**Rerun a failed batch:** in the grid, open the failed *snapshot* map index, press *Clear*,
keep *Downstream* ticked in the dialog (so *stream* runs again too) and confirm. Only that
batch's Spark job runs again. Clearing a batch that **finished** reads it again, before or
after the stream started: once the stream runs it is the only writer of the sink, so the batch
hands its rows to the stream, which replaces the batch's key ranges exactly in one of its
micro-batches (the task ends once it did). `reread_batches` in a new run's form reads batches
or whole tables again the same way.
"""

RESET = """\
**Reset** (last section of the form) stops the stream, drops the sink tables of the previous
load and forgets the plan, the batch results and the stream's checkpoint: everything is loaded
again into empty tables.
"""

WATCHDOG = """\
The binlog stream runs outside the pipeline's DAG run. Every 5 minutes the watchdog DAG checks it
and logs **alive** (pid, host), its **last commit** (micro-batch, offset, how long ago), its
**lag** behind the binlog head and the **tail of its log**: open the latest run's
`stream_health` task log. The same figures are in the task's XCom and in the
`{dag_id}_stream_health` asset's events (*Assets* view).

A dead stream is relaunched from its checkpoint (nothing lost, nothing twice). The check fails
when the stream stays more than 10 minutes behind. While no stream was ever started at the
state location, the check is skipped. It runs unpaused from the start; point its
`state_location` at the pipeline's.

Once an hour (param `consistency_every_s`; 0 = every run, -1 = never) the
`consistency_check` task compares the sink with the source: per table and per batch, the row
count and a checksum of the keys, both at the offset the stream last committed. It fails when
they differ and names the batches to read again (clear those snapshot tasks in `{dag_id}`);
the `stream_health` log shows the last result.

For an Iceberg sink, once an hour (param `maintenance_every_s`) the `sink_maintenance` task
compacts the stream's small files (a partition with 16 or more files under 96 MiB is rewritten
as files of up to 128 MiB, in one commit) and expires snapshots older than an hour (the newest
10 are kept), deleting the files only those read. Rows, readers and the running stream are not
disturbed. For other sinks it is skipped.
"""

STREAMS_WATCHDOG = """\
Every 5 minutes **find_pipelines** lists the pipelines to watch: the *state locations* given,
and every state location found under the *search roots* (a folder holding a `pipeline.json`,
up to three levels down), each once; pipelines whose stream has not been started yet are
logged and left out. Then one **stream_health** map index per pipeline, named after its state
location, checks that pipeline's stream (alive, last commit, lag, the tail of its log) and
relaunches it from its checkpoint if it died. One pipeline's failed check does not stop the
others'. Each check records the stream's progress per sink table on this DAG's asset alias.

Use it instead of the pipelines' own watchdog DAGs (pause those), so each stream is checked
once. Should two watchdogs relaunch one dead stream at the same moment, the stream's lease lets
one stream start and the other check watches that one.
"""

# name -> block: the names of the markers in the docs pages
BLOCKS: dict[str, str] = {
    "start": START,
    "rerun": RERUN,
    "reset": RESET,
    "watchdog": WATCHDOG,
    "streams-watchdog": STREAMS_WATCHDOG,
}

# The DAG template's defaults: what the docs site shows in place of a pipeline's own values.
GENERIC: dict[str, str] = {
    "loads": "`shop.orders`",
    "sink": "a Delta Lake",
    "watchdog_dag_id": "mysql_cdc_stream_watchdog",
    "dag_id": "mysql_cdc_pipeline",
}


def render(name: str, values: Mapping[str, str] | None = None) -> str:
    """Block ``name`` with a pipeline's values, or the template's defaults for the docs site."""
    return BLOCKS[name].format(**{**GENERIC, **(values or {})})


def pipeline_doc(
    watchdog_dag_id: str,
    tables: Sequence[str],
    sink_words: str,
    pipeline_file: str | None = None,
    route: Sequence[Mapping[str, Any]] = (),
    transform: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The pipeline DAG's docs (the DAG page's *Docs*)."""
    values = {"loads": ", ".join(f"`{t}`" for t in tables), "sink": sink_words, "watchdog_dag_id": watchdog_dag_id}
    doc = (
        "\n### MySQL CDC pipeline\n\n"
        "Lock-free, parallel initial load of MySQL/MariaDB tables, handed off to a binlog stream with\n"
        "nothing lost and nothing duplicated (the Flink CDC incremental snapshot algorithm, on Spark).\n\n"
        + "\n".join(render(n, values) for n in ("start", "rerun", "reset"))
    )
    if pipeline_file:
        doc += f"""
**Defined by the pipeline file** `{pipeline_file}`: its values are the form's defaults (and
those of scheduled runs). Change them there; `python -m airflow_provider_mysqlcdc.pipelines
validate` checks the file.
"""
    if route or transform:
        lines = [f"- `{r['source_table']}` → `{r['sink_table']}`" for r in route]
        for t in transform:
            parts = [f"{k} `{t[k]}`" for k in ("projection", "filter") if t.get(k)]
            if t.get("partition_keys"):
                parts.append(f"partitioned by `{', '.join(t['partition_keys'])}`")
            lines.append(f"- `{t['source_table']}`: {'; '.join(parts) or 'primary keys ' + str(t.get('primary_keys'))}")
        doc += (
            "\n**Routes and transforms** (from the pipeline file; the snapshot and the stream apply them alike, "
            "a table merged from several keeps each row's source in `_source_table`):\n\n" + "\n".join(lines) + "\n"
        )
    return doc


def watchdog_doc(dag_id: str) -> str:
    """The pipeline's watchdog DAG's docs."""
    return f"\n### Stream watchdog for `{dag_id}`\n\n" + render("watchdog", {"dag_id": dag_id})


def streams_watchdog_doc() -> str:
    """The many-pipelines watchdog DAG's docs."""
    return "\n### Stream watchdog for many pipelines\n\n" + render("streams-watchdog")
