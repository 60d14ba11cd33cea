"""The installed SGLang, read as source (ast): where each hooked function is
defined, its signature, and every call site with the arguments it passes.

Nothing here imports ``sglang`` (that costs tens of seconds and global state);
the package is only located on disk. The keyword sets come from SGLang's own
files, never from a list written here.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

WANTED_VERSION = "0.5.23"


def sglang_root() -> Optional[Path]:
    """The installed ``sglang`` package folder, or None."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def sglang_version() -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def why_not_installed() -> Optional[str]:
    """Why the SGLang tests cannot run here, or None."""
    root, version = sglang_root(), sglang_version()
    if root is None or version is None:
        return (f"sglang=={WANTED_VERSION} is not installed (scripts/setup_env.sh installs it with "
                "--no-deps plus tests/sglang_plugin/requirements.txt)")
    if version != WANTED_VERSION:
        return f"installed sglang is {version}; these tests read {WANTED_VERSION}'s call sites"
    return None


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.lru_cache(maxsize=1)
def _sources() -> tuple[tuple[Path, str], ...]:
    """Every non-test .py file of the package, with its text."""
    root = sglang_root()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if any(p in ("test", "tests") for p in rel) or rel[-1].startswith("test_"):
            continue
        out.append((path, path.read_text(encoding="utf-8", errors="replace")))
    return tuple(out)


@dataclass(frozen=True)
class Definition:
    """Where a dotted target is defined: module file, class (for a method), node."""

    path: Path
    cls: Optional[str]
    node: ast.FunctionDef

    @property
    def is_method(self) -> bool:
        return self.cls is not None


def find_definition(target: str) -> Optional[Definition]:
    """The ``def`` of ``target`` in the installed source (module-level function
    or method of a module-level class), or None."""
    root = sglang_root()
    parts = target.split(".")
    assert parts[0] == "sglang", target
    for cut in range(len(parts) - 1, 0, -1):
        base = root.joinpath(*parts[1:cut])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                rest = parts[cut:]
                return _def_in(path, rest)
    return None


def _def_in(path: Path, rest: list[str]) -> Optional[Definition]:
    body = _parse(path).body
    cls = None
    if len(rest) == 2:
        cls = rest[0]
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == cls]
        if not classes:
            return None
        body = classes[-1].body
    elif len(rest) != 1:
        return None
    defs = [n for n in body if isinstance(n, ast.FunctionDef) and n.name == rest[-1]]
    return Definition(path, cls, defs[-1]) if defs else None


def _module_constants(tree: ast.Module) -> dict:
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            try:
                out[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:
                pass
    return out


@dataclass(frozen=True)
class Dotted:
    """A default written as a dotted name (``IdSpaceKind.FULL``), which the source
    alone cannot evaluate: equal to the same text, and to a replacement's default
    that names it (``sgl_meta.sglang.kv_indices.SglangDefault``, ``module:text``)."""

    text: str

    def __eq__(self, other) -> bool:
        if isinstance(other, Dotted):
            return other.text == self.text
        return str(getattr(other, "spec", "")).endswith(":" + self.text)

    def __hash__(self) -> int:
        return hash(self.text)


def signature_of(defn: Definition) -> inspect.Signature:
    """The ``def``'s signature, defaults evaluated (literals, module constants,
    dotted names as :class:`Dotted`)."""
    consts = _module_constants(_parse(defn.path))
    a = defn.node.args

    def default(node):
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.Attribute):
            return Dotted(ast.unparse(node))
        return ast.literal_eval(node)

    P = inspect.Parameter
    params = []
    positional = a.posonlyargs + a.args
    pos_defaults = [P.empty] * (len(positional) - len(a.defaults)) + [default(d) for d in a.defaults]
    for i, (arg, d) in enumerate(zip(positional, pos_defaults)):
        kind = P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(P(arg.arg, kind, default=d))
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is None else default(d)))
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


@dataclass(frozen=True)
class CallSite:
    """One call of a hooked function in SGLang's source."""

    file: str  # relative to the sglang package folder
    line: int
    positional: int  # positional arguments, self included for a method called on an instance
    keywords: tuple[str, ...]  # keyword names, sorted
    unpacked: bool  # *args / **kwargs: not checkable statically
    kwargs_only: bool = False  # the unpacking is **kwargs alone: a replacement taking **kwargs binds it

    def __str__(self) -> str:
        kw = ", ".join(self.keywords)
        return f"{self.file}:{self.line} ({self.positional} positional; keywords: {kw or '-'})"


def _calls_of_own_method(tree: ast.Module, name: str, skip_class: Optional[str]) -> set[int]:
    """ids of the ``self.<name>(...)`` calls inside a class (other than
    ``skip_class``) that defines ``name`` itself: they reach that class's own
    method, never the hooked one (e.g. another backend's ``_apply_cuda_graph_metadata``)."""
    out: set[int] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or cls.name == skip_class:
            continue
        if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in cls.body):
            continue
        for node in ast.walk(cls):
            f = node.func if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name) and f.value.id == "self":
                out.add(id(node))
    return out


def call_sites(target: str) -> list[CallSite]:
    """Every call of ``target`` in the installed SGLang (tests excluded).

    Found by name: ``from m import f [as g]`` then ``g(...)`` (or a Triton
    kernel's ``g[grid](...)``); ``m.f(...)``;
    and attributes that hold the function (``self._x = f`` then
    ``self._x(...)``, as the DSA backend does with its metadata generators).
    A method target matches every ``obj.name(...)`` call (any of them may
    reach the hooked class), with the instance counted as a positional
    argument, except ``self.name(...)`` inside another class that defines
    ``name`` itself (that reaches its own method). A constructor: see
    :func:`_constructor_sites`.
    """
    if target.endswith(".__init__"):
        return _constructor_sites(target)
    defn = find_definition(target)
    name = target.rsplit(".", 1)[-1]
    files = [(p, t) for p, t in _sources() if name in t]
    local_names: dict[Path, set[str]] = {}
    aliases: set[str] = set()
    for path, _ in files:
        tree = _parse(path)
        names = {name} if defn is not None and path == defn.path and not defn.is_method else set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name == name:
                        names.add(a.asname or a.name)
        local_names[path] = names
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Name):
                if node.value.id in names:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    aliases.update(t.attr for t in targets if isinstance(t, ast.Attribute))
    attrs = {name} | aliases
    scan = [(p, t) for p, t in _sources() if any(a in t for a in attrs)]
    sites = []
    for path, _ in scan:
        tree = _parse(path)
        own = _calls_of_own_method(tree, name, skip_class=defn.cls if defn is not None and path == defn.path else None)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or id(node) in own:
                continue
            f = node.func
            if isinstance(f, ast.Subscript):  # a Triton kernel's launch: kernel[grid](...)
                f = f.value
            by_name = isinstance(f, ast.Name) and f.id in local_names.get(path, ())
            by_attr = isinstance(f, ast.Attribute) and f.attr in attrs
            if not (by_name or by_attr):
                continue
            bound = defn is not None and defn.is_method and isinstance(f, ast.Attribute)
            sites.append(_site(path, node, 1 if bound else 0))
    return sites


def _site(path: Path, node: ast.Call, extra: int) -> CallSite:
    """``node`` as a :class:`CallSite`; ``extra``: positional arguments it passes implicitly (self)."""
    return CallSite(
        file=str(path.relative_to(sglang_root())),
        line=node.lineno,
        positional=len(node.args) + extra,
        keywords=tuple(sorted(k.arg for k in node.keywords if k.arg is not None)),
        unpacked=any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords),
        kwargs_only=not any(isinstance(a, ast.Starred) for a in node.args),
    )


def _constructor_sites(target: str) -> list[CallSite]:
    """A constructor's calls (``pkg.module.Class.__init__``): the class called by
    name (``Class(...)``, ``module.Class(...)``) and ``super().__init__(...)`` in
    the classes that name it as a base, the new instance counted as a positional
    argument. Other classes' ``__init__`` calls are not its."""
    cls = target.split(".")[-2]

    def named(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id == cls) or (isinstance(node, ast.Attribute) and node.attr == cls)

    def super_init(node: ast.AST) -> bool:
        f = node.func if isinstance(node, ast.Call) else None
        return (isinstance(f, ast.Attribute) and f.attr == "__init__" and isinstance(f.value, ast.Call)
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "super")

    sites = []
    for path, text in _sources():
        if cls not in text:
            continue
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ClassDef) and any(named(b) for b in node.bases):
                sites += [_site(path, call, 1) for call in ast.walk(node) if super_init(call)]
            elif isinstance(node, ast.Call) and named(node.func):
                sites.append(_site(path, node, 1))
    return sites
