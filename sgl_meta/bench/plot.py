"""``--plot``: host and device microseconds per call vs batch-size bucket."""

from __future__ import annotations

from pathlib import Path


def check_available() -> None:
    """Fail before the run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise SystemExit(
            "--plot needs matplotlib (pip install 'sgl-meta[dev]' or pip install matplotlib)"
        ) from e


def write_plot(path: str, doc: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cuda = doc.get("graph_mode") is not None  # a device panel
    lines = [(pr, w) for pr in doc["presets"] for w in pr["workloads"]]
    if not lines:
        return
    ncols = 2 if cuda else 1
    fig, axes = plt.subplots(len(lines), ncols, figsize=(6.5 * ncols, 3.2 * len(lines)), squeeze=False)
    for row, (pr, w) in enumerate(lines):
        per = w["per_bucket"]
        x = [b["bucket"] for b in per]
        ax = axes[row][0]
        ax.plot(x, [b["host_us_per_call"]["fused"] for b in per], "o-", ms=3, label="sgl_meta (fused)")
        ax.plot(x, [b["host_us_per_call"]["ref"] for b in per], "s--", ms=3, label="eager reference")
        ax.set_title(f"{pr['preset']}: {w['op']} - host" + ("" if cuda else " (CPU wall time)"), fontsize=9)
        ax.set_ylabel("us per call (median)")
        if cuda:
            ax = axes[row][1]
            ax.plot(x, [b["device_us_per_call"]["fused"] for b in per], "o-", ms=3, label="sgl_meta (fused)")
            ax.plot(x, [b["device_us_per_call"]["ref"] for b in per], "s--", ms=3, label="eager reference")
            for impl in w.get("impls", ())[2:]:  # baselines (e.g. the bare gather)
                ax.plot(x, [b["device_us_per_call"][impl] for b in per], "^-.", ms=3, label=impl)
            ax.plot(x, [b["floor_us_per_call"] for b in per], ":", color="gray", label="bytes floor")
            ax.set_title(f"{pr['preset']}: {w['op']} - device (graph replay)", fontsize=9)
        for ax in axes[row]:
            ax.set_yscale("log")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("batch-size bucket")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    env = doc["environment"]
    fig.suptitle(f"sgl_meta bench - {env.get('gpu') or env.get('cpu')} - torch {env['torch']}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
