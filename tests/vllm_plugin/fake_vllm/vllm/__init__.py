"""A stand-in for vLLM 0.33's package layout, only the names the sgl-meta
plugin reads (tests/vllm_plugin/test_vllm_plugin_unit.py puts it on sys.path)."""
