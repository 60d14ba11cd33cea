"""SGLang's own CUDA-graph decode-step metadata with the sgl-meta plugin off and on
(``python -m sgl_meta.bench --sglang``; see ``cli.py``)."""
