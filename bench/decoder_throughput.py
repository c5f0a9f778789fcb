"""Binlog decoder throughput: the fast reader against mariadb-binlog and python-mysql-replication.

Workload: ``--rows`` (default 400,000) autocommit single-row UPDATEs alternating between a
captured table (BIGINT, VARCHAR(64), DECIMAL(12,2), DATETIME(3), TEXT) and an uncaptured
one of the same shape, in a private MariaDB (binlog ROW / FULL / metadata FULL). On that
one binlog range it times, in the same run, median of ``--repeat`` (3):

  * ``mariadb-binlog -v --table=events`` over the server's binlog file (the C baseline,
    decoding only the captured table's rows, as we do); ``mariadb-binlog -v`` without the
    filter is printed too;
  * python-mysql-replication through the engine's ``BinlogReader``, raw library values
    (``library``); with ``--normalized`` also normalized to the canonical values
    (``library_normalized``: what the stream does today);
  * ``FastBinlogReader.batches()`` -- Arrow record batches (``decoder``), and
    ``FastBinlogReader.changes()`` -- RowChange objects (``decoder_rowchange``).

Rates are rows of the captured table per second. Last line:
    decoder_rows_per_s=<int> ratio_vs_mariadb_binlog=<float> ratio_vs_library=<float>
(the ratios against ``mariadb-binlog -v --table`` and the raw library: the conservative ones).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from workloads import binlog_bytes, binlog_files, load, timed

from airflow_provider_mysqlcdc.cdc.binlog.fast import ChangeBatch, FastBinlogReader
from airflow_provider_mysqlcdc.cdc.binlog.reader import BinlogReader
from airflow_provider_mysqlcdc.cdc.events import RowChange
from airflow_provider_mysqlcdc.cdc.model import TableId
from airflow_provider_mysqlcdc.cdc.source.discovery import read_table_schema
from airflow_provider_mysqlcdc.cdc.types import row_normalizer
from mysqlcdc_harness.mariadb import MariaDB, _find


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=400_000, help="UPDATE statements in the workload (both tables)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--normalized",
        action="store_true",
        help="also time the library with cdc.types normalization (slow: doubles the library time)",
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="mysqlcdc-bench-decoder-") as work:
        server = MariaDB(
            base_dir=Path(work) / "mariadb", server_id=1, extra_args=("--max-binlog-size=1073741824",)
        ).start()
        try:
            t0 = time.perf_counter()
            start, end, expect = load(server, args.rows)
            print(
                f"workload: {args.rows} single-row UPDATEs ({expect} on the captured table), "
                f"{binlog_bytes(server, start, end):,} binlog bytes, written in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )
            source = server.source_config()
            table = TableId("bench", "events")
            conn = source.connect()
            schema = read_table_schema(conn, table)
            conn.close()
            normalize = row_normalizer(schema, "UTC")
            paths = [str(server.datadir / f) for f in binlog_files(server, start, end)]
            results: dict[str, float] = {}

            def mariadb_binlog(table_filter: bool) -> Callable[[], int]:
                def run() -> int:
                    argv = [
                        _find("mariadb-binlog"),
                        "--no-defaults",
                        "-v",
                        f"--start-position={start.position}",
                        f"--stop-position={end.position}",
                    ]
                    if table_filter:
                        argv.append("--table=events")
                    with open(os.devnull, "wb") as devnull:
                        subprocess.run(argv + paths, stdout=devnull, check=True)
                    return expect

                run.__name__ = "mariadb_binlog"
                return run

            def library(normalized: bool) -> Callable[[], int]:
                def run() -> int:
                    n = 0
                    norms = {table: normalize} if normalized else None
                    with BinlogReader(source, 6102, start, end, tables=[table], normalizers=norms) as r:
                        for ev in r:
                            n += isinstance(ev, RowChange)
                    return n

                run.__name__ = "library"
                return run

            def decoder() -> int:
                n = 0
                with FastBinlogReader(source, 6101, start, end, tables=[table]) as r:
                    for item in r.batches():
                        if isinstance(item, ChangeBatch):
                            n += item.num_rows
                return n

            def decoder_rowchange() -> int:
                n = 0
                with FastBinlogReader(source, 6101, start, end, tables=[table]) as r:
                    for item in r.changes():
                        n += isinstance(item, RowChange)
                return n

            runs = [
                ("mariadb_binlog_table", mariadb_binlog(True)),
                ("mariadb_binlog_all", mariadb_binlog(False)),
                ("library", library(False)),
                *([("library_normalized", library(True))] if args.normalized else []),
                ("decoder", decoder),
                ("decoder_rowchange", decoder_rowchange),
            ]
            for name, fn in runs:
                secs = timed(fn, expect, args.repeat)
                results[name] = expect / secs
                print(
                    f"{name}: {expect} rows in {secs:.3f}s = {expect / secs:,.0f} rows/s (median of {args.repeat})",
                    flush=True,
                )
            rate = results["decoder"]
            print(
                f"decoder_rows_per_s={int(rate)} "
                f"ratio_vs_mariadb_binlog={rate / results['mariadb_binlog_table']:.2f} "
                f"ratio_vs_library={rate / results['library']:.2f}"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
