"""The baseline a Spark user would write instead of mysqlcdc: one spark-submit of Spark's own
JDBC reader with ``partitionColumn`` into Parquet files (not consistent: each partition's SELECT
sees the table at its own moment; no binlog hand-off).

    MYSQLCDC_PASSWORD=... spark-submit --master 'local[2]' --jars mariadb-java-client.jar \\
        bench/plain_spark_load.py --url jdbc:mysql://127.0.0.1:3306/bench --user root \\
        --table orders --column id --lower 1 --upper 20000000 --partitions 20 --out /tmp/plain

Plain Spark has no Delta writer without the delta-spark jars (no Maven here), so it writes the
Parquet files a Delta table is made of, without the commit. Prints ``PLAIN_ROWS <n>``.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("url", "user", "table", "column", "out"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--lower", type=int, required=True)
    ap.add_argument("--upper", type=int, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--fetch-size", type=int, default=10_000)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("plain spark JDBC load").getOrCreate()
    df = spark.read.jdbc(
        args.url,
        args.table,
        column=args.column,
        lowerBound=args.lower,
        upperBound=args.upper,
        numPartitions=args.partitions,
        properties={
            "user": args.user,
            "password": os.environ["MYSQLCDC_PASSWORD"],
            "driver": "org.mariadb.jdbc.Driver",
            "fetchsize": str(args.fetch_size),
        },
    )
    df.write.mode("overwrite").parquet(args.out)
    print(f"PLAIN_ROWS {spark.read.parquet(args.out).count()}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
