"""``python -m sgl_meta.bench --upstream``: SGLang's own kernels beside ours, same inputs.

Files, one job each: ``loader`` (find the installed package or wheel, say what is
missing, load the kernel files by path), ``fixtures`` (input pools and poisoned
output sets), ``rows_mha`` / ``rows_dsa`` / ``rows_kv`` (the table's rows: calls
of ours, the eager reference and upstream, and what upstream defines),
``measure`` (host, device, in-graph launch, checks), ``coldstart`` (first call
over the bucket list with empty compile caches), ``table`` (rich table,
markdown), ``run`` (the mode).
"""
