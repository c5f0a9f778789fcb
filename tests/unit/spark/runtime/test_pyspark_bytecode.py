"""Bytecode added to Spark's Python zips: used by zipimport, verified, and never wrong."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from airflow_provider_mysqlcdc.spark.runtime import pyspark_bytecode as pb

MOD = "def where():\n    return 'mod'\n\ndef boom():\n    raise ValueError('from the zip')\n"


def _spark_home(tmp_path: Path, files: dict[str, bytes | str]) -> Path:
    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return tmp_path / "spark"


def _import_from(zip_path: Path, code: str) -> str:
    """Run ``code`` in a fresh interpreter with the zip first on the path, as Spark starts workers."""
    env = {**os.environ, "PYTHONPATH": str(zip_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_bytecode_is_added_used_and_reported(tmp_path):
    home = _spark_home(
        tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": MOD, "pkg/data.txt": "kept", "pkg/bad.py": "def (:\n"}
    )
    zip_path = home / "python" / "lib" / "pyspark.zip"
    # Before: zipimport compiles the source (the module's file is the .py entry)
    assert _import_from(zip_path, "import pkg.mod; print(pkg.mod.__file__)").endswith("mod.py")
    before = pb.zip_state(zip_path)
    assert (before.sources, before.current, before.missing) == (3, 0, 3)

    result = pb.add_bytecode(zip_path)
    assert result.compiled == 2 and result.failed == ["pkg/bad.py"]
    state = pb.zip_state(zip_path)
    assert (state.current, state.missing) == (2, 1)  # the broken source stays as it was
    with zipfile.ZipFile(zip_path) as zf:
        assert zf.read("pkg/data.txt") == b"kept" and zf.read("pkg/mod.py").decode() == MOD

    # After: the module comes from the .pyc entry, and tracebacks still show the source lines
    out = _import_from(
        zip_path,
        "import traceback, pkg.mod\nprint(pkg.mod.__file__, pkg.mod.where())\n"
        "try:\n    pkg.mod.boom()\nexcept ValueError:\n    print(traceback.format_exc().replace(chr(10), '|'))",
    )
    first, tb = out.splitlines()
    assert first.endswith("mod.pyc mod"), first
    assert f"{zip_path}{os.sep}pkg/mod.py" in tb and "raise ValueError('from the zip')" in tb

    # A second run finds nothing to do and leaves the file alone
    mtime = zip_path.stat().st_mtime_ns
    assert pb.add_bytecode(zip_path).compiled == 0
    assert zip_path.stat().st_mtime_ns == mtime
    assert not [p for p in zip_path.parent.iterdir() if p.name.endswith(".tmp")]


def test_bytecode_of_another_python_or_source_is_never_used(tmp_path):
    home = _spark_home(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": MOD})
    zip_path = home / "python" / "lib" / "pyspark.zip"
    pb.add_bytecode(zip_path)
    with zipfile.ZipFile(zip_path) as zf:
        entries = {i.filename: zf.read(i) for i in zf.infolist()}

    # Another Python version wrote these pycs: this one compiles the source, and a rerun replaces them
    other = dict(entries, **{"pkg/mod.pyc": b"\x00\x00\r\n" + entries["pkg/mod.pyc"][4:]})
    with zipfile.ZipFile(zip_path, "w") as zf:
        for name, data in other.items():
            zf.writestr(name, data)
    state = pb.zip_state(zip_path)
    assert (state.current, state.stale) == (1, 1)
    assert _import_from(zip_path, "import pkg.mod; print(pkg.mod.__file__)").endswith("mod.py")
    assert pb.add_bytecode(zip_path).compiled == 1 and pb.zip_state(zip_path).missing == 0

    # The source changed under a pyc (hash-checked): the new source runs, not the old bytecode
    changed = dict(entries, **{"pkg/mod.py": MOD.replace("'mod'", "'changed'")})
    with zipfile.ZipFile(zip_path, "w") as zf:
        for name, data in changed.items():
            zf.writestr(name, data)
    assert _import_from(zip_path, "import pkg.mod; print(pkg.mod.where())") == "changed"


def test_remove_puts_sources_only_back(tmp_path):
    home = _spark_home(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": MOD, "pkg/lonely.pyc": b"x"})
    zip_path = home / "python" / "lib" / "pyspark.zip"
    pb.add_bytecode(zip_path)
    assert pb.remove_bytecode(zip_path) == 2
    with zipfile.ZipFile(zip_path) as zf:
        assert sorted(zf.namelist()) == ["pkg/__init__.py", "pkg/lonely.pyc", "pkg/mod.py"]


def test_cli_check_compile_and_errors(tmp_path, capsys, monkeypatch):
    home = _spark_home(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": MOD})
    lib = home / "python" / "lib"
    with zipfile.ZipFile(lib / "py4j-0.10.9.9-src.zip", "w") as zf:
        zf.writestr("py4j/__init__.py", "")
    assert pb.main(["--spark-home", str(home), "--check"]) == 1
    assert "2 of 2 modules without bytecode" in capsys.readouterr().out
    assert pb.main(["--spark-home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "pyspark.zip: compiled 2 modules" in out and "py4j-0.10.9.9-src.zip: compiled 1 modules" in out
    assert pb.main(["--spark-home", str(home), "--check"]) == 0
    assert pb.main(["--spark-home", str(home), "--quiet"]) == 0
    assert capsys.readouterr().out.count("all with bytecode") == 2  # from --check; --quiet printed nothing

    monkeypatch.setenv("SPARK_HOME", str(home))
    assert pb.missing_bytecode_note() is None
    pb.remove_bytecode(lib / "pyspark.zip")
    note = pb.missing_bytecode_note()
    assert note and "has no bytecode" in note and pb.HINT in note

    assert pb.main(["--spark-home", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "no pyspark.zip in" in err and "point SPARK_HOME (or --spark-home)" in err


def test_an_unwritable_installation_gets_a_clear_error(tmp_path, capsys, monkeypatch):
    home = _spark_home(tmp_path, {"pkg/__init__.py": ""})

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pb.tempfile, "mkstemp", refuse)  # as for a non-root user under /opt/spark
    assert pb.main(["--spark-home", str(home)]) == 2
    err = capsys.readouterr().err
    assert "cannot write beside" in err and "run this as the user that owns the Spark installation" in err
    assert pb.zip_state(home / "python" / "lib" / "pyspark.zip").current == 0


def test_the_real_pyspark_zip_compiles_and_imports_from_bytecode(tmp_path):
    """Every module of the installed PySpark compiles on this Python, and the stream's runner loads from pycs."""
    spec = importlib.util.find_spec("pyspark")
    real = Path(list(spec.submodule_search_locations)[0]) / "python" / "lib" / "pyspark.zip"
    copy = tmp_path / "pyspark.zip"
    shutil.copyfile(real, copy)
    pb.remove_bytecode(copy)
    result = pb.add_bytecode(copy)
    assert result.failed == [] and result.compiled > 1000
    out = _import_from(
        copy,
        "import pyspark.sql.streaming.python_streaming_source_runner as r, pyspark.sql.session as s\n"
        "print(r.__file__); print(s.__file__)",
    )
    assert all(line.startswith(str(copy)) and line.endswith(".pyc") for line in out.splitlines()), out
