"""A seeded concurrent writer: random inserts, updates, deletes and primary-key changes.

It runs in background threads, each with its own connection, against one table while a
snapshot or stream reads it. ``hot_keys`` (e.g. chunk boundaries, first and last keys)
are targeted with probability ``hot_ratio``, so changes land where they are hardest.
The writer knows nothing of the engine: it only talks SQL.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pymysql

Key = tuple


@dataclass
class TableSpec:
    """How to write random rows of one table."""

    database: str
    table: str
    key_columns: Sequence[str]
    value_columns: Sequence[str]
    new_key: Callable[[random.Random], Key]
    values: Callable[[random.Random], Sequence[Any]]
    near: Callable[[Key, random.Random], Key] | None = None

    @property
    def qualified(self) -> str:
        return f"`{self.database}`.`{self.table}`"

    def key_where(self) -> str:
        return " AND ".join(f"`{c}` = %s" for c in self.key_columns)


@dataclass
class WriterStats:
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    key_moves: int = 0
    transactions: int = 0
    conflicts: int = 0

    @property
    def total(self) -> int:
        return self.inserts + self.updates + self.deletes + self.key_moves


@dataclass
class ConcurrentWriter:
    connect: Callable[[], pymysql.connections.Connection]
    spec: TableSpec
    seed: int = 0
    threads: int = 2
    hot_keys: Sequence[Key] = ()
    hot_ratio: float = 0.3
    weights: tuple[float, float, float, float] = (0.3, 0.4, 0.15, 0.15)  # insert, update, delete, move
    max_statements_per_tx: int = 3
    pause_s: float = 0.0
    stats: WriterStats = field(default_factory=WriterStats)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _keys: list[Key] = field(default_factory=list)
    _key_set: dict = field(default_factory=dict)  # key -> its index in _keys
    _lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)
    _pause: threading.Condition = field(default_factory=threading.Condition)
    _paused: bool = False
    _parked: int = 0

    def pause(self, timeout_s: float = 30.0) -> None:
        """Stop writing and return once every thread is between transactions (for statements a
        real application would not write through: dropping or renaming the table)."""
        with self._pause:
            self._paused = True
            if not self._pause.wait_for(lambda: self._parked >= len(self._threads), timeout_s):
                raise TimeoutError("writer threads did not park")

    def resume(self, reload_keys: bool = False) -> None:
        if reload_keys:
            with self._lock:
                self._load_keys()
        with self._pause:
            self._paused = False
            self._pause.notify_all()

    def _park_if_paused(self) -> None:
        with self._pause:
            if not self._paused:
                return
            self._parked += 1
            self._pause.notify_all()
            self._pause.wait_for(lambda: not self._paused or self._stop.is_set())
            self._parked -= 1

    def _load_keys(self) -> None:
        cols = ", ".join(f"`{c}`" for c in self.spec.key_columns)
        c = self.connect()
        try:
            with c.cursor() as cur:
                cur.execute(f"SELECT {cols} FROM {self.spec.qualified}")
                self._keys = [tuple(r) for r in cur.fetchall()]
        finally:
            c.close()
        self._key_set = {k: i for i, k in enumerate(self._keys)}

    def start(self) -> "ConcurrentWriter":
        self._load_keys()
        for i in range(self.threads):
            t = threading.Thread(
                target=self._run, args=(random.Random(self.seed * 1000 + i),), name=f"writer-{i}", daemon=True
            )
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> WriterStats:
        self._stop.set()
        with self._pause:
            self._paused = False
            self._pause.notify_all()
        for t in self._threads:
            t.join(30)
        self._threads.clear()
        if self.errors:
            raise RuntimeError(f"writer failed: {self.errors[0]!r}") from self.errors[0]
        return self.stats

    def __enter__(self) -> "ConcurrentWriter":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- ops ---------------------------------------------------------------------------------

    def _pick_existing(self, rng: random.Random) -> Key | None:
        with self._lock:
            if self.hot_keys and rng.random() < self.hot_ratio:
                k = rng.choice(self.hot_keys)
                if self.spec.near is not None and rng.random() < 0.5:
                    k = self.spec.near(k, rng)
                return k
            if not self._keys:
                return None
            return rng.choice(self._keys)

    def _fresh_key(self, rng: random.Random) -> Key:
        with self._lock:
            for _ in range(50):
                if self.hot_keys and self.spec.near is not None and rng.random() < self.hot_ratio:
                    k = self.spec.near(rng.choice(self.hot_keys), rng)
                else:
                    k = self.spec.new_key(rng)
                if k not in self._key_set:
                    return k
            return self.spec.new_key(rng)

    def _remember(self, add: Key | None = None, drop: Key | None = None) -> None:
        """Keep the live keys as a list (``choice()`` stays uniform) with each key's index: a
        delete moves the last key into the hole, O(1). (``list.remove`` scanned the whole list
        for every delete or key move: on a 60,000-row table that was most of a writer's CPU.)"""
        with self._lock:
            if drop is not None and drop in self._key_set:
                at = self._key_set.pop(drop)
                last = self._keys.pop()
                if at < len(self._keys):
                    self._keys[at] = last
                    self._key_set[last] = at
            if add is not None and add not in self._key_set:
                self._key_set[add] = len(self._keys)
                self._keys.append(add)

    def _one(self, cur, rng: random.Random) -> None:
        s = self.spec
        op = rng.choices(("insert", "update", "delete", "move"), weights=self.weights)[0]
        if op == "insert":
            k = self._fresh_key(rng)
            cols = ", ".join(f"`{c}`" for c in (*s.key_columns, *s.value_columns))
            marks = ", ".join(["%s"] * (len(s.key_columns) + len(s.value_columns)))
            cur.execute(f"INSERT INTO {s.qualified} ({cols}) VALUES ({marks})", (*k, *s.values(rng)))
            self._remember(add=k)
            self.stats.inserts += 1
            return
        k = self._pick_existing(rng)
        if k is None:
            return
        if op == "update":
            sets = ", ".join(f"`{c}` = %s" for c in s.value_columns)
            cur.execute(f"UPDATE {s.qualified} SET {sets} WHERE {s.key_where()}", (*s.values(rng), *k))
            self.stats.updates += 1
        elif op == "delete":
            cur.execute(f"DELETE FROM {s.qualified} WHERE {s.key_where()}", k)
            self._remember(drop=k)
            self.stats.deletes += 1
        else:
            nk = self._fresh_key(rng)
            sets = ", ".join(f"`{c}` = %s" for c in s.key_columns)
            n = cur.execute(f"UPDATE {s.qualified} SET {sets} WHERE {s.key_where()}", (*nk, *k))
            if n:
                self._remember(add=nk, drop=k)
            self.stats.key_moves += 1

    def _run(self, rng: random.Random) -> None:
        try:
            conn = self.connect()
            conn.autocommit(False)
        except BaseException as e:  # pragma: no cover - surfaced by stop()
            self.errors.append(e)
            return
        try:
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    self._park_if_paused()
                    if self._stop.is_set():
                        break
                    try:
                        for _ in range(rng.randint(1, self.max_statements_per_tx)):
                            self._one(cur, rng)
                        conn.commit()
                        self.stats.transactions += 1
                    except pymysql.err.IntegrityError:
                        conn.rollback()
                        self.stats.conflicts += 1
                    except pymysql.err.OperationalError as e:
                        if e.args and e.args[0] in (1213, 1205):  # deadlock / lock wait: retry
                            conn.rollback()
                            self.stats.conflicts += 1
                            continue
                        raise
                    if self.pause_s:
                        time.sleep(self.pause_s)
        except BaseException as e:
            self.errors.append(e)
        finally:
            try:
                conn.close()
            except Exception:
                pass
