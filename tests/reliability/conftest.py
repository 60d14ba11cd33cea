"""Hypothesis profiles and the per-op example counter of the reliability suite.

Profiles (pick with SGLMETA_HYPOTHESIS_PROFILE, default ``ci``):
  ci        thousands of examples over all ops in a couple of minutes (2 cores)
  long      about 13x ci, on demand
  sanitize  a few dozen per op: for compute-sanitizer runs (every launch is slow)
  dev       quick smoke while editing
``max_examples`` is the budget of an op of weight 1 (tests/reliability/registry.py);
the example counts actually run are printed at the end of the session (and
written to $SGLMETA_STATS_JSON when set).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # the strategy modules, for workers too

_COMMON = dict(
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
    print_blob=True,
)
settings.register_profile("ci", max_examples=1500, **_COMMON)
settings.register_profile("long", max_examples=20000, **_COMMON)
settings.register_profile("sanitize", max_examples=40, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
PROFILE = os.environ.get("SGLMETA_HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

from stats import COVERAGE, EXAMPLES  # noqa: E402  (filled by test_props / test_hostile_values)


def pytest_report_header(config):
    return [f"hypothesis profile: {PROFILE} (SGLMETA_HYPOTHESIS_PROFILE), "
            f"max_examples per op of weight 1: {settings.default.max_examples}"]


def pytest_terminal_summary(terminalreporter):
    if not EXAMPLES:
        return
    tr = terminalreporter
    tr.section(f"hypothesis examples run (profile {PROFILE})")
    for (test, name, device), n in sorted(EXAMPLES.items()):
        tr.write_line(f"{test:<24} {name:<34} {device:<5} {n:>7}")
    tr.write_line(f"{'total':<65} {sum(EXAMPLES.values()):>7}")
    verbose = config_verbose(tr)
    for key, cov in sorted(COVERAGE.items()):
        if cov and verbose:
            tr.write_line(f"coverage {'/'.join(key)}: " + ", ".join(f"{k} {v}" for k, v in sorted(cov.items())))
    path = os.environ.get("SGLMETA_STATS_JSON")
    if path:
        Path(path).write_text(json.dumps(
            {"profile": PROFILE,
             "examples": [dict(test=t, op=o, device=d, n=n, coverage=dict(COVERAGE.get((t, o, d), {})))
                          for (t, o, d), n in sorted(EXAMPLES.items())]},
            indent=1))


def config_verbose(tr) -> bool:
    """Coverage labels per op with -v (always in $SGLMETA_STATS_JSON)."""
    return tr.config.getoption("verbose") > 0
