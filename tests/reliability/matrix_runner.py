"""Parent side of matrix_worker.py: run rows in a child process, survive crashes.

A child that dies mid-row gets that row recorded as ``crashed`` (exit status,
signal, output tail) and a fresh child continues with the rows after it, so
one crash fails one row and every other row still gets its verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

WORKER = Path(__file__).resolve().parent / "matrix_worker.py"
PREFIX = "@@MATRIX "


def run_seed(config) -> int:
    """The run seed of tests/conftest.py (BASE_SEED, printed in the header), so a
    worker's random base calls replay with SGLMETA_TEST_SEED too."""
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(getattr(plugin, "BASE_SEED", None), int):
            return plugin.BASE_SEED
    return 0


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def run_rows(table: str, device: str, row_ids: list, seed: int, *, sync: bool = False, compare: bool = False,
             timeout_s: float = 300.0) -> dict:
    """Returns {row id: record}; a record has ``event`` in returned / raised /
    setup_error / crashed / hung, plus ``output`` (the child's stdout+stderr)
    for crashed / hung rows and for every row of a one-row run. `compare`: a
    returned row also carries ``compared`` / ``differs`` (matrix_worker.py)."""
    results: dict = {}
    remaining = list(row_ids)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")  # a crash prints its stack
    while remaining:
        cmd = [sys.executable, str(WORKER), table, device, str(seed)] + (["--sync"] if sync else []) + (
            ["--compare"] if compare else [])
        try:
            proc = subprocess.run(cmd, input=json.dumps(remaining), capture_output=True, text=True,
                                  timeout=timeout_s, env=env)
            out, err, rc, hung = proc.stdout, proc.stderr, proc.returncode, False
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            rc, hung = None, True
        current = None
        for line in out.splitlines():
            if not line.startswith(PREFIX):
                continue
            rec = json.loads(line[len(PREFIX):])
            if rec["event"] == "start":
                current = rec["row"]
            else:
                results[rec["row"]] = rec
                current = None
        everything = out + err
        # for crash reports: what the child said besides the protocol lines; a one-row
        # run keeps all of it (a device assert's report may flood the tail of it)
        chatter = "\n".join(l for l in everything.splitlines() if not l.startswith(PREFIX))
        if len(row_ids) > 1:
            chatter = chatter[-4000:]
        if len(row_ids) == 1 and row_ids[0] in results:
            results[row_ids[0]]["output"] = everything
            results[row_ids[0]]["returncode"] = rc
        if current is None:
            missing = [r for r in remaining if r not in results]
            if missing:  # died before its first row (import error, ...)
                for r in missing:
                    results[r] = dict(row=r, event="crashed", output=chatter,
                                      exit="before the first row: " + (_describe_exit(rc) if rc is not None else "hung"))
            break
        results[current] = dict(row=current, event="hung" if hung else "crashed", output=chatter,
                                 exit="timeout" if hung else _describe_exit(rc), returncode=rc)
        remaining = [r for r in remaining if r not in results]
    return results


def run_each_alone(table: str, device: str, row_ids: list, seed: int, *, sync: bool = False,
                   timeout_s: float = 240.0, parallel: int = 8) -> dict:
    """One child process per row (a device assert poisons its CUDA context),
    `parallel` children at a time: {row id: record with its own output}."""
    from concurrent.futures import ThreadPoolExecutor

    def one(row_id):
        return run_rows(table, device, [row_id], seed, sync=sync, timeout_s=timeout_s)[row_id]

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(zip(row_ids, pool.map(one, row_ids)))
