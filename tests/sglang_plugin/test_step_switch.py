"""The ``--sglang`` bench's switch turns the plugin off and on in one process:
every attribute the hooks changed (targets and ``from X import Y`` copies, also
in modules imported after the hooks) goes back to SGLang's value and forth to
the hooked one. Checked in a fresh interpreter (HookRegistry patches globals).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import sglang_source

CHILD = textwrap.dedent(
    """
    import importlib, json, sys, types
    import sglang.kernels.ops.attention.trtllm_mha_graph_metadata as mod
    import sglang.srt.layers.attention.trtllm_mha_backend as mha
    from sgl_meta.bench.sglang_step.plugin_switch import Switch

    fn_name = "update_trtllm_mha_graph_metadata"
    # Held in a tuple: HookRegistry also rebinds module globals that are the original.
    ref = (getattr(mod, fn_name), mha.TRTLLMHAAttnBackend.__dict__["init_forward_metadata_out_graph"])
    switch, hooks = Switch.apply()
    hooked_fn = getattr(mod, fn_name)
    # A module imported after the hooks copies whatever is current.
    late = types.ModuleType("late_importer")
    setattr(late, fn_name, hooked_fn)
    sys.modules["late_importer"] = late
    switch.refresh()
    out = {"hooked": hooked_fn is not ref[0] and hooked_fn.__wrapped__ is ref[0], "n": len(switch)}
    switch.off()
    out["off"] = (getattr(mod, fn_name) is ref[0] and getattr(late, fn_name) is ref[0]
                  and mha.TRTLLMHAAttnBackend.__dict__["init_forward_metadata_out_graph"] is ref[1])
    switch.on()
    out["on"] = (getattr(mod, fn_name) is hooked_fn and getattr(late, fn_name) is hooked_fn
                 and mha.TRTLLMHAAttnBackend.__dict__["init_forward_metadata_out_graph"] is not ref[1])
    # A module imported while the switch is off copies SGLang's function; the
    # switch turned on before refresh records it: refresh gives it the current side.
    switch.off()
    early = types.ModuleType("imported_while_off")
    setattr(early, fn_name, getattr(mod, fn_name))
    sys.modules["imported_while_off"] = early
    switch.on()
    switch.refresh()
    out["copied_while_off"] = getattr(early, fn_name) is hooked_fn
    switch.off()
    out["copied_while_off"] &= getattr(early, fn_name) is ref[0]
    # --control: the same attributes switched, to SGLang's values on both sides.
    switch.on()
    control = switch.control()
    control.on()
    out["control"] = (len(control) == len(switch) and getattr(mod, fn_name) is ref[0]
                      and getattr(late, fn_name) is ref[0]
                      and mha.TRTLLMHAAttnBackend.__dict__["init_forward_metadata_out_graph"] is ref[1])
    print(json.dumps(out))
    """
)


def test_switch_restores_and_reapplies_every_hooked_attribute():
    why = sglang_source.why_not_installed()
    if why:
        pytest.skip(why)
    env = {**os.environ, "SGLMETA_SGLANG_PLUGIN": "force"}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"hooked": True, "n": out["n"], "off": True, "on": True, "copied_while_off": True,
                   "control": True}, \
        (out, proc.stderr[-3000:])
    assert out["n"] >= 3
