#!/usr/bin/env python3
"""Disk used by gpuprofd's database and its WAL for the same data, before and after the WAL
limits (docs/reliability.md, "A full disk at start-up"). Writes N experiments the way the
daemon does (one transaction each: an experiment row, then a few events, each its own commit,
synchronous=FULL), with SQLite's defaults ("before") and with the daemon's settings ("after":
wal_autocheckpoint=128, journal_size_limit=512 KiB, and the monitor's idle TRUNCATE
checkpoint). Prints the data written and the blocks db + wal take (du), on the directory given
(run it on a small tmpfs). Usage: store_wal_disk_use.py DIR [N]"""
import os
import sqlite3
import subprocess
import sys

SCHEMA = """
CREATE TABLE experiments (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
  user TEXT NOT NULL, state INTEGER NOT NULL, workload INTEGER NOT NULL,
  created_unix_ns INTEGER NOT NULL, proto BLOB NOT NULL);
CREATE INDEX experiments_by_state ON experiments (state, seq);
CREATE INDEX experiments_by_user ON experiments (user, seq);
CREATE TABLE events (experiment_id TEXT NOT NULL REFERENCES experiments (id), seq INTEGER NOT NULL,
  proto BLOB NOT NULL, PRIMARY KEY (experiment_id, seq)) WITHOUT ROWID;
"""


def allocated(path):
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.stat(path + suffix).st_blocks * 512
        except FileNotFoundError:
            pass
    return total


def run(directory, name, count, pragmas, idle_checkpoint):
    path = os.path.join(directory, name + ".db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    for pragma in pragmas:
        db.execute(pragma)
    db.executescript(SCHEMA)
    data = 0
    peak = 0
    for i in range(count):
        experiment = os.urandom(700)  # a stored experiment with its result: a few hundred bytes
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO experiments (id, user, state, workload, created_unix_ns, proto) "
                   "VALUES (?, 'tester', 1, 3, ?, ?)", (f"exp-{i:06d}", i, experiment))
        db.execute("INSERT INTO events VALUES (?, 1, ?)", (f"exp-{i:06d}", os.urandom(60)))
        db.execute("COMMIT")
        data += 700 + 60
        for seq in range(2, 5):  # running, progress, finished
            event = os.urandom(120)
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO events VALUES (?, ?, ?)", (f"exp-{i:06d}", seq, event))
            db.execute("UPDATE experiments SET state = ?, proto = ? WHERE id = ?",
                       (seq, experiment, f"exp-{i:06d}"))
            db.execute("COMMIT")
            data += 120
        peak = max(peak, allocated(path))
    busy_writing = allocated(path)
    if idle_checkpoint:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    idle = allocated(path)
    db.close()
    print(f"{name}: {count} experiments, {data / 1024:.0f} KiB of rows; db+wal on disk: "
          f"peak {peak / 1024:.0f} KiB, after the last write {busy_writing / 1024:.0f} KiB, "
          f"idle {idle / 1024:.0f} KiB")


def main():
    directory = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    run(directory, "before", count, [], idle_checkpoint=False)
    run(directory, "after", count,
        ["PRAGMA wal_autocheckpoint = 128", "PRAGMA journal_size_limit = 524288"],
        idle_checkpoint=True)
    subprocess.run(["du", "-k", "--apparent-size", directory], check=False)


if __name__ == "__main__":
    main()
