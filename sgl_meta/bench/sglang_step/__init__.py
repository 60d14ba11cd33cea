"""SGLang's own CUDA-graph decode-step metadata with the sgl-meta plugin off and on
(``python -m sgl_meta.bench --sglang``; see ``cli.py``)."""

from __future__ import annotations

import importlib.util
from typing import Optional

import torch


def why_not_here() -> Optional[str]:
    """Why ``--sglang`` cannot run in this process (None: it can), asked before
    anything imports SGLang."""
    if not torch.cuda.is_available():
        return ("needs a CUDA device (torch.cuda.is_available() is False): SGLang 0.5.23's attention backends do "
                "not build without one (FA3 checks the GPU's SM version, the Triton and DSA backends query the "
                "driver) and the numbers are its CUDA-graph replays. Run it on a GPU machine (docs/sglang_step.md); "
                "on CPU, tests/sglang_plugin checks the hooks against SGLang's own code")
    if importlib.util.find_spec("sglang") is None:
        return ("needs SGLang 0.5.23 importable: pip install --no-deps sglang==0.5.23 -r "
                "tests/sglang_plugin/requirements.txt (docs/sglang.md), or a carried copy on PYTHONPATH "
                "(docs/sglang_step.md)")
    return None
