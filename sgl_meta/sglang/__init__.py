"""SGLang integration: functions the sgl_meta plugin installs into SGLang 0.5.23.

Nothing here imports ``sglang`` at import time (``import sgl_meta`` never does).
"""
