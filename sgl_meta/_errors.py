"""What a caller sees when an argument is wrong: one wording for every op.

Every message reads ``sgl_meta.<function>: <argument> <what was expected>, got
<what was given>``. Tensor checks (dtype, device, shape, strides, aliasing) are
made once, in C++ (``csrc/common/checks.h``), for both calling paths. The
argument *types* are checked here, on the dispatcher path only: the fast path
reads exact types and declines anything else, so a wrong type always lands
here before torch's generic dispatcher message could.
"""

from __future__ import annotations

import operator
import re
from typing import TYPE_CHECKING, Iterable, NoReturn

import torch

if TYPE_CHECKING:
    from ._op import Arg, Op

_compiling = torch.compiler.is_compiling


def _type_name(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} Tensor of shape {tuple(value.shape)}"
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def integer(fn: str, name: str, value, *, tensors: bool = False) -> int:
    """An int argument: a Python int, or anything with ``__index__`` (numpy
    integers; with ``tensors``, one-element integer tensors too, as upstream's
    Python drop-in targets accept them) as an int, a SymInt under tracing as it
    is; never a bool or a float, and no tensor unless asked (no implicit sync)."""
    if type(value) is int:  # the common case first: host time per call
        return value if _INT64_MIN <= value <= _INT64_MAX else _int64_overflow(fn, name, value)
    if isinstance(value, torch.SymInt):
        return value
    is_tensor = isinstance(value, torch.Tensor)
    if not isinstance(value, bool) and (not is_tensor or (tensors and value.dtype != torch.bool)):
        try:
            index = operator.index(value)
        except TypeError:
            pass
        else:
            return index if _INT64_MIN <= index <= _INT64_MAX else _int64_overflow(fn, name, index)
    raise TypeError(f"sgl_meta.{fn}: {name} must be an int, got {_type_name(value)}")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64_overflow(fn: str, name: str, value: int):
    # The schema's int is int64: the dispatcher would reject it as "expected int, found int".
    raise RuntimeError(f"sgl_meta.{fn}: {name} = {value} is outside the int64 range")


def _tensor(fn: str, name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"sgl_meta.{fn}: {name} must be a Tensor, got {_type_name(value)}")
    return value


def _sequence(fn: str, name: str, value, item) -> list:
    if not isinstance(value, (list, tuple)):
        what = "tensors" if item is _tensor else "ints"
        raise TypeError(f"sgl_meta.{fn}: {name} must be a list of {what}, got {_type_name(value)}")
    return [item(fn, f"{name}[{i}]", v) for i, v in enumerate(value)]


def _boolean(fn: str, name: str, value) -> bool:
    if type(value) is bool:
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)  # as numpy integers are taken for ints
    raise TypeError(f"sgl_meta.{fn}: {name} must be a bool, got {_type_name(value)}")


_ITEM = {"Tensor": _tensor, "int": integer, "bool": _boolean}


def _argument(fn: str, arg: "Arg", value):
    """One argument by its schema kind: ``T``, ``T?`` (None allowed) or ``T[]``."""
    item = _ITEM[arg.kind.rstrip("?[]")]
    if arg.kind.endswith("?") and value is None:
        return None
    if arg.kind.endswith("[]"):
        return _sequence(fn, arg.name, value, item)
    return item(fn, arg.name, value)


def checked(op: "Op", args: tuple) -> tuple:
    """``args`` (schema order) with ints normalised, or a TypeError naming
    the op and the argument. Under torch.compile the arguments are traced
    values (SymInts, FakeTensors) and pass as they are."""
    if _compiling():
        return args
    return tuple(_argument(op.name, a, v) for a, v in zip(op.args, args))


def raise_as(err: Exception, *, op: str, caller: str, names: Iterable[tuple[str, str]] = ()) -> NoReturn:
    """Raise ``err`` of ``op`` as the error of ``caller`` (a drop-in over ``op``),
    its argument names in the caller's terms (``names``: regex, replacement)."""
    message = str(err)
    prefix = f"sgl_meta.{op}: "
    if not message.startswith(prefix):
        raise err
    message = message[len(prefix):]
    for pattern, replacement in names:
        message = re.sub(pattern, replacement, message)
    raise type(err)(f"sgl_meta.{caller}: {message}") from err
