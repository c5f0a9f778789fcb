"""A partitioned Iceberg table: its spec from a transform's ``partition_keys``, and the partition
values of rows, computed here so every data file this sink writes holds one partition.

Why not pyiceberg's own writes: ``_dataframe_to_data_files`` computes partition values with
``Transform.pyarrow_transform``, which for every transform but identity needs the optional
``pyiceberg-core`` (Rust) package; and ``parquet_file_to_data_file`` infers a file's partition from
its column bounds, which refuses a bucket (not order-preserving). Both are replaced by the same
step: each row's partition value from pyiceberg's reference transforms (``Transform.transform``,
pure Python with ``mmh3``) over the Iceberg representation of the column (micros for timestamps,
days for dates), computed once per distinct value; the rows grouped by it; each group written as
its own file(s), whose ``DataFile.partition`` is that value.

The snapshot's Spark tasks call ``write_partitioned`` (so the executors need pyiceberg, as the
driver does, for a partitioned table only); the stream's commits call ``data_files``.
"""

from __future__ import annotations

import base64
import decimal
import itertools
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ....cdc.errors import ConfigError
from ....cdc.model import TableId
from ....cdc.transform.partitioning import PartitionKey


def transform_of(key: PartitionKey) -> Any:
    """pyiceberg's transform for one entry."""
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        YearTransform,
    )

    if key.transform == "bucket":
        return BucketTransform(num_buckets=key.width)
    if key.transform == "truncate":
        return TruncateTransform(width=key.width)
    return {
        "identity": IdentityTransform,
        "year": YearTransform,
        "month": MonthTransform,
        "day": DayTransform,
        "hour": HourTransform,
    }[key.transform]()


def build_spec(table_id: TableId, schema: Any, keys: Sequence[PartitionKey]) -> Any:
    """The ``PartitionSpec`` of ``keys`` over the Iceberg ``schema`` (field ids from 1000, as
    Iceberg numbers partition fields); ConfigError for a column it lacks or a transform Iceberg
    does not define for the column's type (the plan step checked both on the Arrow types; this is
    Iceberg's own word on its types)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec

    fields = []
    for i, key in enumerate(keys):
        try:
            source = schema.find_field(key.column, case_sensitive=False)
        except ValueError:
            raise ConfigError(
                f"iceberg {table_id}: partition_keys entry {key.text!r} names {key.column}, which the table does "
                f"not have ({', '.join(f.name for f in schema.fields)}). Fix: partition by one of its columns"
            ) from None
        transform = transform_of(key)
        if not transform.can_transform(source.field_type):
            raise ConfigError(
                f"iceberg {table_id}: partition_keys entry {key.text!r}: Iceberg has no {key.transform} over "
                f"{source.name}'s type {source.field_type}. Fix: use another transform or column"
            )
        fields.append(
            PartitionField(source_id=source.field_id, field_id=1000 + i, transform=transform, name=key.field_name)
        )
    return PartitionSpec(*fields)


def describe_spec(spec: Any, schema: Any) -> list[str]:
    """A spec as partition_keys entries (``day(ts)``, ``bucket(4, id)``, ``region``), to compare and show."""
    from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform

    out = []
    for f in spec.fields:
        name = schema.find_column_name(f.source_id) or f"#{f.source_id}"
        t = f.transform
        if isinstance(t, IdentityTransform):
            out.append(name)
        elif isinstance(t, BucketTransform):
            out.append(f"bucket({t.num_buckets}, {name})")
        elif isinstance(t, TruncateTransform):
            out.append(f"truncate({t.width}, {name})")
        else:
            out.append(f"{str(t).split('[')[0]}({name})")
    return out


def check_spec(table_id: TableId, spec: Any, schema: Any, keys: Sequence[PartitionKey]) -> None:
    """An existing table's spec must be the one the pipeline asks for: a table partitioned otherwise
    would hold files laid out by another spec than the writes', which Iceberg allows only through
    a spec evolution this sink does not do."""
    have = describe_spec(spec, schema)
    want = [k.text for k in keys]
    if [h.lower() for h in have] != [w.lower() for w in want]:
        found = f"partitioned by [{', '.join(have)}]" if have else "unpartitioned"
        asked = f"partition_keys [{', '.join(want)}]" if want else "no partition_keys"
        raise ConfigError(
            f"Iceberg table {table_id} is {found}, and the pipeline's transform gives {asked}. Fix: reset the "
            "sink table (trigger the pipeline with reset=true: it drops the table and loads it again, "
            f"partitioned as the file says), or {'drop partition_keys' if want else 'set partition_keys'} "
            f"to match the table ({', '.join(have) or 'none'})"
        )


# --- partition values --------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionColumns:
    """What computing a table's partition values needs, small enough to ship to Spark tasks:
    per partition field its source column's name and Iceberg type and its transform."""

    fields: tuple[tuple[str, Any, Any], ...]  # (column, iceberg source type, pyiceberg transform)

    @classmethod
    def of(cls, spec: Any, schema: Any) -> "PartitionColumns":
        return cls(
            tuple(
                (schema.find_column_name(f.source_id), schema.find_field(f.source_id).field_type, f.transform)
                for f in spec.fields
            )
        )

    def values(self, rows: pa.Table | pa.RecordBatch) -> list[tuple[Any, ...]]:
        """Each row's partition value: one Iceberg partition-record value per field."""
        per_field = [_field_values(rows.column(name), source, transform) for name, source, transform in self.fields]
        return list(zip(*per_field)) if per_field else [()] * rows.num_rows

    def split(self, rows: pa.Table) -> list[tuple[tuple[Any, ...], pa.Table]]:
        """``rows`` grouped by partition value, in order of first appearance."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, value in enumerate(self.values(rows)):
            groups.setdefault(value, []).append(i)
        if len(groups) == 1:
            return [(next(iter(groups)), rows)]
        return [(value, rows.take(pa.array(idx, pa.int64()))) for value, idx in groups.items()]


def _internal(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column's values as Iceberg represents them: timestamps as microseconds since the epoch
    (UTC), dates as days since it, the rest as Python values."""
    t = col.type
    if pa.types.is_timestamp(t):
        if t.unit != "us":
            col = col.cast(pa.timestamp("us", tz=t.tz))
        return col.cast(pa.int64()).to_pylist()
    if pa.types.is_date32(t):
        return col.cast(pa.int32()).to_pylist()
    return col.to_pylist()


def _field_values(col: pa.Array | pa.ChunkedArray, source: Any, transform: Any) -> list[Any]:
    from pyiceberg.transforms import IdentityTransform

    values = _internal(col)
    if isinstance(transform, IdentityTransform):
        return values
    fn = transform.transform(source)
    done: dict[Any, Any] = {None: None}
    out = []
    for v in values:
        if v not in done:
            done[v] = fn(v)
        out.append(done[v])
    return out


# A partition value in a Spark task's file record (JSON): Decimal and bytes tagged, the rest as is.
def encode_value(values: tuple[Any, ...]) -> str:
    def one(v: Any) -> Any:
        if isinstance(v, decimal.Decimal):
            return {"decimal": str(v)}
        if isinstance(v, bytes):
            return {"bytes": base64.b64encode(v).decode("ascii")}
        return v

    return json.dumps([one(v) for v in values])


def decode_value(text: str) -> tuple[Any, ...]:
    def one(v: Any) -> Any:
        if isinstance(v, dict):
            return decimal.Decimal(v["decimal"]) if "decimal" in v else base64.b64decode(v["bytes"])
        return v

    return tuple(one(v) for v in json.loads(text))


# --- writes --------------------------------------------------------------------------------------


def data_files(meta: Any, rows: pa.Table, io: Any, write_uuid: uuid.UUID, counter: itertools.count[int]) -> list[Any]:
    """``rows`` as new data files of the table (``meta``): pyiceberg's writer, each file within one
    partition of a partitioned table."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    spec = meta.spec()
    if spec.is_unpartitioned():
        return list(_dataframe_to_data_files(meta, rows, io, write_uuid, counter))
    from pyiceberg.io.pyarrow import bin_pack_arrow_table, pyarrow_to_schema, write_file
    from pyiceberg.partitioning import PartitionFieldValue
    from pyiceberg.partitioning import PartitionKey as IcebergPartitionKey
    from pyiceberg.table import TableProperties, WriteTask
    from pyiceberg.utils.properties import property_as_int

    schema = meta.schema()
    task_schema = pyarrow_to_schema(rows.schema, name_mapping=schema.name_mapping, format_version=meta.format_version)
    target = property_as_int(
        meta.properties,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
    )
    tasks = []
    for value, part in PartitionColumns.of(spec, schema).split(rows):
        key = IcebergPartitionKey(
            field_values=[PartitionFieldValue(f, v) for f, v in zip(spec.fields, value)],
            partition_spec=spec,
            schema=schema,
        )
        for batches in bin_pack_arrow_table(part, target):
            tasks.append(
                WriteTask(
                    write_uuid=write_uuid,
                    task_id=next(counter),
                    record_batches=batches,
                    partition_key=key,
                    schema=task_schema,
                )
            )
    return list(write_file(io=io, table_metadata=meta, tasks=iter(tasks)))


def snapshot_data_file(io: Any, meta: Any, path: str, partition: tuple[Any, ...] | None) -> Any:
    """A Parquet file a snapshot task wrote, as a data file of the table: pyiceberg's own reading of
    an unpartitioned table's file, else its footer's statistics with the partition value the task
    computed (``parquet_file_to_data_file`` would infer it from the bounds, which no bucket allows)."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_file_to_data_file,
        parquet_path_to_id_mapping,
    )

    if meta.spec().is_unpartitioned():
        return parquet_file_to_data_file(io, meta, path)
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    if partition is None:
        raise ConfigError(
            f"{path}: a snapshot file of a partitioned Iceberg table came without its partition value (written "
            "before the table was partitioned?). Fix: rerun the batch"
        )
    input_file = io.new_input(path)
    with input_file.open() as stream:
        footer = pq.read_metadata(stream)
    schema = meta.schema()
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, meta.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        file_size_in_bytes=len(input_file),
        sort_order_id=None,
        spec_id=meta.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )


def write_partitioned(spec: Any, columns: PartitionColumns, batches: Iterable[pa.RecordBatch]) -> Iterator[Any]:
    """A Spark task's rows as Parquet files, one or more per partition value (``spec``: the
    ``FileWriteSpec``; each file's record carries its partition value, JSON, in ``stats``). Rows
    are buffered per value up to a row group, and every value's file stays open until the task's
    rows end: a task holds one row group per partition value it meets at most."""
    from ..files.arrow import FileRecord, _task_file_name, conform

    fs, prefix = spec.fs.open()
    open_files: dict[tuple[Any, ...], tuple[str, Any, Any, list[pa.RecordBatch], list[int]]] = {}

    def flush(entry: tuple[str, Any, Any, list[pa.RecordBatch], list[int]]) -> None:
        _, _, writer, buffered, counts = entry
        if buffered:
            table = pa.Table.from_batches(buffered, spec.schema)
            writer.write_table(table, row_group_size=table.num_rows)
            counts[0] += table.num_rows
            buffered.clear()

    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([conform(batch, spec.schema)])
            for value, part in columns.split(table):
                entry = open_files.get(value)
                if entry is None:
                    rel = _task_file_name(replace(spec, name_prefix=f"{spec.name_prefix}-p{len(open_files):04d}"))
                    fs.create_dir(prefix + rel.rsplit("/", 1)[0], recursive=True)
                    out = fs.open_output_stream(prefix + rel)
                    entry = (rel, out, pq.ParquetWriter(out, spec.schema, compression="snappy"), [], [0])
                    open_files[value] = entry
                entry[3].extend(part.to_batches())
                if sum(b.num_rows for b in entry[3]) >= spec.row_group_rows:
                    flush(entry)
        for entry in open_files.values():
            flush(entry)
    finally:
        for _, out, writer, _, _ in open_files.values():
            writer.close()
            out.close()
    for value, (rel, _, _, _, counts) in open_files.items():
        if counts[0]:
            yield FileRecord(rel, int(fs.get_file_info(prefix + rel).size), counts[0], encode_value(value), None)


def partitioned_writer(spec: Any, columns: PartitionColumns) -> Any:
    """The ``mapInArrow`` function of ``write_partitioned``: file records as Arrow batches."""
    record_schema = pa.schema(
        [
            ("path", pa.string(), False),
            ("size", pa.int64(), False),
            ("num_rows", pa.int64(), False),
            ("stats", pa.string()),
            ("counts", pa.string()),
        ]
    )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        records = [r.__dict__ for r in write_partitioned(spec, columns, batches)]
        if records:
            yield pa.RecordBatch.from_pylist(records, schema=record_schema)

    return run
