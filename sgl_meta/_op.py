"""Each op described once.

An op's arguments (names, order, kinds, which ones it writes, schema defaults)
are its schema, registered once in ``csrc/torch_bindings.cpp`` and read here at
import. :func:`define` adds what the schema cannot say (the family, the
upstream function the op stands in for, each tensor's dtype set, Python-level
defaults, the docstring) and returns the public Python function, generated from
that one description: its signature, the fast-path call (``sgl_meta/_fast.py``),
the argument type checks on the dispatcher path (``sgl_meta/_errors.py``).
The fakes (``_fake.py``), ``__all__``, the docs' op table
(``scripts/op_table.py``) and the bad-input matrix (``tests/reliability``) read
the same registry, :data:`OPS`. A drop-in (an upstream function's exact
signature over one of our ops) comes from :func:`positional` (the schema's own
order), :func:`adapt` (another signature, its arguments mapped) or is a plain
function marked with :func:`dropin`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any, Callable, Optional, Union

import torch

from . import _C  # noqa: F401  (loads the library: registers torch.ops.sgl_meta.*)
from . import _errors, _fast

INT32 = ("int32",)
INT64 = ("int64",)
INDEX = ("int32", "int64")
BOOL = ("bool",)
FLOATING = ("bfloat16", "float16", "float32")

REQUIRED = object()
"""Marks an argument the caller must pass (no default)."""


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of an op, in schema order."""

    name: str
    kind: str  # "Tensor", "Tensor?", "Tensor[]", "int", "int?", "int[]" or "bool"
    written: bool  # the op writes it (an output)
    dtypes: tuple[str, ...]  # tensors: the accepted dtypes; () for scalars
    default: Any = REQUIRED

    @property
    def is_tensor(self) -> bool:
        return self.kind.startswith("Tensor")


@dataclasses.dataclass(frozen=True)
class Op:
    """The description of one op (see :func:`define`)."""

    name: str
    family: str  # csrc/<family>/, sgl_meta/<family>.py, docs/operators/<family>.md
    upstream: str  # what it stands in for in the engine
    args: tuple[Arg, ...]
    keyword_only: bool
    summary: str  # the docstring's first line


OPS: dict[str, Op] = {}
"""Every op, by name, in definition order."""

DROPINS: dict[str, tuple[str, str]] = {}
"""Drop-in name -> (the upstream function whose signature it keeps, its module)."""

_KINDS = {
    "Tensor": "Tensor",
    "Optional[Tensor]": "Tensor?",
    "List[Tensor]": "Tensor[]",
    "int": "int",
    "Optional[int]": "int?",
    "List[int]": "int[]",
    "bool": "bool",
}


def _schema_args(name: str, dtypes: dict[str, tuple[str, ...]], defaults: dict[str, Any], keyword_only: bool):
    schema = getattr(torch.ops.sgl_meta, name).default._schema
    args = []
    for a in schema.arguments:
        kind = _KINDS[str(a.type)]
        default = a.default_value if a.has_default_value() else REQUIRED
        if keyword_only and kind in ("Tensor?", "int?"):
            default = None  # keywords need no placeholder for what is not given
        default = defaults.get(a.name, default)
        args.append(Arg(a.name, kind, bool(a.alias_info and a.alias_info.is_write),
                        dtypes.get(a.name, INT32) if kind.startswith("Tensor") else (), default))
    unknown = set(dtypes) - {a.name for a in args if a.is_tensor} | set(defaults) - {a.name for a in args}
    if unknown:
        raise AssertionError(f"sgl_meta.{name}: the description names no such tensor argument: {sorted(unknown)}")
    return tuple(args)


def define(
    name: str,
    *,
    family: str,
    upstream: str,
    doc: str,
    int64: tuple[str, ...] = (),
    index: tuple[str, ...] = (),
    boolean: tuple[str, ...] = (),
    floating: tuple[str, ...] = (),
    defaults: Optional[dict[str, Any]] = None,
    keyword_only: bool = True,
) -> Callable[..., None]:
    """Describe op ``name`` and return its public Python function.

    Args:
        family: the op family (its ``csrc/`` folder and Python module).
        upstream: the engine function it stands in for (docs, op table).
        doc: the public function's docstring.
        int64: tensor arguments that must be int64; ``index``: int32 or int64;
            ``boolean``: bool (per-group flags); ``floating``: bfloat16, float16
            or float32 (values the op copies, such as hidden states); every
            other tensor argument is int32.
        defaults: Python-level defaults beyond the schema's (e.g. ``None`` for
            an optional output list, which the op receives as an empty list;
            ``None`` for an ``int?`` that means "not given").
        keyword_only: the function takes keywords only (positional functions
            keep an upstream signature, schema order).
    """
    dtypes = {**{n: INT64 for n in int64}, **{n: INDEX for n in index}, **{n: BOOL for n in boolean},
              **{n: FLOATING for n in floating}}
    op = Op(name, family, upstream, _schema_args(name, dtypes, defaults or {}, keyword_only), keyword_only,
            doc.strip().splitlines()[0])
    OPS[name] = op
    fn = _function(op, _call(op))
    fn.__doc__ = doc
    fn.__module__ = sys._getframe(1).f_globals["__name__"]
    return fn


def positional(fn: Callable[..., None], name: str, *, upstream: str, module: str, doc: str) -> Callable[..., None]:
    """A drop-in over ``fn``'s op whose signature is the schema's, in order, every
    argument required: for an upstream function the schema copies exactly."""
    op = fn.op
    exact = dataclasses.replace(op, keyword_only=False,
                                args=tuple(dataclasses.replace(a, default=REQUIRED) for a in op.args))
    dropin_fn = _function(exact, _call(op), name)
    dropin_fn.__doc__ = doc
    dropin_fn.__module__ = sys._getframe(1).f_globals["__name__"]
    DROPINS[name] = (upstream, module)
    return dropin_fn


def signature(params: str) -> inspect.Signature:
    """The signature written as a ``def``'s parameter list (an upstream
    function's, copied once as text)."""
    namespace: dict[str, Any] = {}
    exec(f"def _f({params}): pass", namespace)  # noqa: S102  (a parameter list, no code)
    return inspect.signature(namespace["_f"])


def adapt(
    target: Callable[..., None],
    name: str,
    *,
    params: str,
    doc: str,
    upstream: str,
    module: str,
    sets: Optional[dict[str, tuple[str, ...]]] = None,
    renamed: Optional[dict[str, str]] = None,
    fixed: Optional[dict[str, Any]] = None,
    check: Optional[Callable[..., None]] = None,
) -> Callable[..., None]:
    """A drop-in called ``name`` with the signature ``params`` (an upstream
    function's), calling ``target``'s op with its arguments mapped:

    * ``sets``: an op list argument from drop-in arguments, one per destination
      set (``{"cache_seqlens": ("cache_seqlens",)}`` for K = 1); an optional
      list takes all of them or none (None). Entries naming arguments the
      drop-in does not have are ignored.
    * ``renamed``: an op argument from the drop-in argument of another name.
    * ``fixed``: an op argument the drop-in does not have, with its value.
    * ``check``: called first with the drop-in arguments it names (upstream's
      host-side asserts).

    Any other op argument comes from the drop-in argument of its name, else its
    default. Errors name the drop-in and its arguments. The mapping is kept
    (``fn.adapter``) so that :func:`adapt_reference` makes the same drop-in
    over the eager reference.
    """
    spec = _Adapter(target.op, name, signature(params), doc, sets or {}, renamed or {}, fixed or {}, check)
    fn = spec.build(_call(target.op))
    fn.__module__ = sys._getframe(1).f_globals["__name__"]
    DROPINS[name] = (upstream, module)
    return fn


def adapt_reference(dropin_fn: Callable[..., None], reference_op: Callable[..., None]) -> Callable[..., None]:
    """``dropin_fn``'s adapter over ``reference_op`` (same keywords as the op)."""
    spec = dropin_fn.adapter
    names = [a.name for a in spec.op.args]

    def call(args: tuple) -> None:
        reference_op(**dict(zip(names, args)))

    fn = spec.build(call)
    fn.__doc__ = f"Eager reference of the drop-in :func:`sgl_meta.{spec.name}` (upstream's signature)."
    fn.__module__ = sys._getframe(1).f_globals["__name__"]
    return fn


def with_signature(name: str, params: str, body: Callable[[dict], Any]) -> Callable[..., Any]:
    """A function called ``name`` with the signature ``params`` whose call is
    ``body(arguments by name, in signature order)``."""
    sig = signature(params)
    namespace: dict[str, Any] = {"_body": body}
    defaults = _parameter_list(sig, namespace)
    pairs = ", ".join(f"{p!r}: {p}" for p in sig.parameters)
    exec(f"def {name}({defaults}):\n    return _body({{{pairs}}})\n", namespace)  # noqa: S102
    fn = namespace[name]
    fn.__qualname__ = name
    fn.__module__ = sys._getframe(1).f_globals["__name__"]
    return fn


def _parameter_list(sig: inspect.Signature, namespace: dict[str, Any]) -> str:
    """``sig`` as a ``def``'s parameter list; defaults go into ``namespace``."""
    params, keyword_only = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            params.append("*")
            keyword_only = True
        if p.default is p.empty:
            params.append(p.name)
        else:
            namespace[f"_p_{p.name}"] = p.default
            params.append(f"{p.name}=_p_{p.name}")
    return ", ".join(params)


def _all_or_none(caller: str, names: tuple[str, ...], values: tuple) -> Union[list, tuple]:
    """The list form of an optional field given per set: all or none (empty)."""
    if all(v is None for v in values):
        return ()
    if any(v is None for v in values):
        listed = f"{', '.join(names[:-1])} and {names[-1]}"
        raise ValueError(f"sgl_meta.{caller}: {listed} must all be tensors or all be None")
    return list(values)


@dataclasses.dataclass(frozen=True)
class _Adapter:
    op: Op
    name: str
    sig: inspect.Signature
    doc: str
    sets: dict[str, tuple[str, ...]]
    renamed: dict[str, str]
    fixed: dict[str, Any]
    check: Optional[Callable[..., None]]

    def build(self, call: Callable[[tuple], None]) -> Callable[..., None]:
        """The drop-in as generated source (one tuple in schema order, no
        intermediate call), over ``call``."""
        name, sig = self.name, self.sig
        namespace: dict[str, Any] = {"_call": call, "_check": self.check, "_all_or_none": _all_or_none,
                                     "_raise_as": _errors.raise_as}
        params = _parameter_list(sig, namespace)
        values, names, annotations = [], [], {}
        for a in self.op.args:
            if a.name in self.fixed:
                namespace[f"_f_{a.name}"] = self.fixed[a.name]
                values.append(f"_f_{a.name}")
            elif all(g in sig.parameters for g in self.sets.get(a.name, ("",))):
                given = self.sets[a.name]
                names += [(rf"\b{a.name}\[{k}\]", g) for k, g in enumerate(given)]
                optional = a.default is None  # an optional output list
                annotations |= dict.fromkeys(given, _ANNOTATIONS["Tensor?" if optional else "Tensor"])
                if optional:  # the all-None and all-given cases inline (a call per list costs ~0.5 us)
                    listed = ", ".join(given)
                    none = " and ".join(f"{g} is None" for g in given)
                    some = " and ".join(f"{g} is not None" for g in given)
                    values.append(f"(() if {none} else [{listed}] if {some} "
                                  f"else _all_or_none({name!r}, {given!r}, ({listed},)))")
                else:
                    values.append(f"[{', '.join(given)}]")
            else:
                source = self.renamed.get(a.name, a.name)
                optional_list = a.kind == "Tensor[]" and a.default is None
                if source in sig.parameters:
                    annotations[source] = _ANNOTATIONS[a.kind]
                    values.append(f"() if {source} is None else {source}" if optional_list else source)
                    if source != a.name:
                        names.append((rf"\b{a.name}\b", source))
                elif optional_list:
                    values.append("()")
                else:
                    assert a.default is not REQUIRED, f"{name} gives no value for {self.op.name}'s {a.name}"
                    namespace[f"_d_{a.name}"] = a.default
                    values.append(f"_d_{a.name}")
        namespace["_names"] = tuple(names)
        body = [f"def {name}({params}) -> None:"]
        if self.check is not None:
            checked = inspect.signature(self.check).parameters
            body.append(f"    _check({', '.join(f'{p}={p}' for p in checked)})")
        body += [
            "    try:",
            f"        _call(({', '.join(values)},))",
            "    except (RuntimeError, TypeError) as err:",
            f"        _raise_as(err, op={self.op.name!r}, caller={name!r}, names=_names)",
        ]
        exec("\n".join(body) + "\n", namespace)  # noqa: S102  (source built above from argument names)
        fn = namespace[name]
        fn.__doc__ = self.doc
        fn.__annotations__ = {p: annotations.get(p, int) for p in sig.parameters} | {"return": None}
        fn.__qualname__ = name
        fn.adapter = self
        return fn


def dropin(upstream: str, module: str) -> Callable[[Callable], Callable]:
    """Mark a function as the drop-in for ``module.upstream`` (same signature)."""

    def mark(fn: Callable) -> Callable:
        DROPINS[fn.__name__] = (upstream, module)
        return fn

    return mark


def exports(module: str, *constants: str) -> list[str]:
    """A family module's ``__all__``: its ops and drop-ins, then ``constants``."""
    mod = sys.modules[module]
    names = [n for n in (*OPS, *DROPINS) if getattr(getattr(mod, n, None), "__module__", None) == module]
    return [*names, *constants]


_CALLS: dict[str, Callable[[tuple], None]] = {}


def _call(op: Op) -> Callable[[tuple], None]:
    """The call of ``op`` with its arguments in schema order, as one tuple:
    the fast path when it takes the call, else the dispatcher after the
    argument type checks (which only run there: the fast path reads exact
    types and declines anything else). One per op, shared by its drop-ins."""
    if op.name not in _CALLS:
        overload = getattr(torch.ops.sgl_meta, op.name).default

        def slow(args: tuple) -> None:
            overload(*_errors.checked(op, args))

        _CALLS[op.name] = _fast.route(f"sgl_meta_fast_{op.name}", slow)
    return _CALLS[op.name]


def _function(op: Op, call: Callable[[tuple], None], name: Optional[str] = None) -> Callable[..., None]:
    """The public function of ``op``: its signature from the description, its
    body one call with the arguments in schema order (generated source, as
    ``dataclasses`` does, so that a call costs what a hand-written one does)."""
    name = name or op.name
    kind = inspect.Parameter.KEYWORD_ONLY if op.keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    # (inspect.Signature refuses a positional required argument after a default.)
    sig = inspect.Signature([inspect.Parameter(a.name, kind, default=inspect.Parameter.empty if a.default is REQUIRED
                                               else a.default) for a in op.args])
    namespace: dict[str, Any] = {"_call": call}
    # An optional output list is None to the caller, empty to the op.
    values = [f"() if {a.name} is None else {a.name}" if a.kind == "Tensor[]" and a.default is None else a.name
              for a in op.args]
    source = f"def {name}({_parameter_list(sig, namespace)}) -> None:\n    _call(({', '.join(values)},))\n"
    exec(source, namespace)  # noqa: S102  (source built above from the schema's names)
    fn = namespace[name]
    fn.__qualname__ = name
    fn.__annotations__ = {a.name: _ANNOTATIONS[a.kind] for a in op.args} | {"return": None}
    fn.op = op
    return fn


_ANNOTATIONS = {
    "Tensor": torch.Tensor,
    "Tensor?": Optional[torch.Tensor],
    "Tensor[]": "Sequence[torch.Tensor]",
    "int": int,
    "int?": Optional[int],
    "int[]": "Sequence[int]",
    "bool": bool,
}
