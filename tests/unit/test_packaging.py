"""setup.cfg's Spark requirements: pip's newest pyspark and newest pyspark-client within them are
one release (both ship the same pyspark/ files; a mixture is refused at run time), with no pin
from the user. The releases are the package index's at the time of writing: when Spark
publishes a new one, add it here and the test says whether the ranges still pair."""

from __future__ import annotations

import configparser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"

# pip index versions pyspark / pyspark-client (2026-12-07)
PYSPARK = "4.3.0 4.2.1 4.2.0 4.1.4 4.1.3 4.1.2 4.1.1 4.1.0 4.0.5 4.0.4 4.0.3 4.0.2 4.0.1 4.0.0".split()
PYSPARK_CLIENT = "4.2.0 4.1.3 4.1.2 4.1.1 4.1.0 4.0.4 4.0.3 4.0.2 4.0.1 4.0.0".split()


def _requirements() -> dict[str, Requirement]:
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    lines = [ln.strip() for ln in cfg["options"]["install_requires"].splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln and not ln.startswith("#")]
    return {r.name: r for r in reqs}


def _newest(req: Requirement, releases: list[str]) -> Version:
    allowed = [Version(v) for v in releases if req.specifier.contains(v)]
    assert allowed, f"no release of {req.name} satisfies {req.specifier}"
    return max(allowed)


def test_pip_picks_one_release_of_pyspark_and_pyspark_client():
    reqs = _requirements()
    assert "pyspark" in reqs and "pyspark-client" in reqs, "both are bounded by this package"
    assert "connect" in reqs["pyspark"].extras
    pyspark, client = _newest(reqs["pyspark"], PYSPARK), _newest(reqs["pyspark-client"], PYSPARK_CLIENT)
    assert pyspark == client, f"pip would install pyspark {pyspark} beside pyspark-client {client}"
    assert pyspark >= Version("4.2.0")  # the Python streaming source's admission control


def test_every_requirement_has_a_lower_bound_it_admits():
    """The oldest-versions install (scripts/compat.py --matrix oldest, tests/install) pins each
    requirement at its lower bound: one without a bound fails that run only after a 40-minute suite."""
    for req in _requirements().values():
        lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "~=", "==")]
        assert lows, f"setup.cfg: {req} has no lower bound"
        assert req.specifier.contains(max(lows), prereleases=True), f"setup.cfg: {req} excludes its lower bound"
