"""SGLang integration: a plugin that makes SGLang call sgl-meta's ops.

SGLang (>= 0.5.23) loads general plugins from the ``sglang.srt.plugins``
entry-point group; sgl-meta's entry point is :func:`sgl_meta.sglang.plugin.register`,
which registers one ``HookRegistry`` hook per row of
:data:`sgl_meta.sglang.hooks.HOOKS`. The replacements live in
:mod:`sgl_meta.sglang.adapters` (SGLang's exact signatures and semantics),
:mod:`sgl_meta.sglang.trtllm_mha_spec` (AROUND hooks for the speculative
paths) and the op modules' drop-ins.

``import sgl_meta`` never imports this package, and nothing here imports
``sglang`` at module level: SGLang is imported only inside ``register()``, which
only SGLang itself calls. See docs/sglang.md.
"""
