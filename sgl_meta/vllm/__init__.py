"""vLLM integration: a plugin that makes vLLM 0.33 call sgl-meta's ops.

vLLM loads general plugins from the ``vllm.general_plugins`` entry-point group
in every process (``vllm.plugins.load_general_plugins``); sgl-meta's entry point
is :func:`sgl_meta.vllm.plugin.register`, which installs one replacement per
usable row of :data:`sgl_meta.vllm.targets.TARGETS`: Triton kernels whose
launch grid our op can recover through vLLM's own ``register_kernels``, the
``BlockTables`` methods whose grid it cannot (and whose kernels read block
tables through a pointer array) by setting the method. The replacements live
in :mod:`sgl_meta.vllm.replacements`.

``import sgl_meta`` never imports this package, and nothing here imports
``vllm`` at module level: vLLM is imported only inside ``register()`` (which
only vLLM calls) and ``python -m sgl_meta.vllm``. See docs/vllm.md.
"""
