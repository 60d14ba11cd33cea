"""Bad-input rows derived from the op descriptions (sgl_meta._op.OPS).

For every argument of every op, from its kind and dtype set alone: a value of
the wrong type (an int for a tensor, a float or bool for an int or one past int64, an int for a
bool, a tensor for a tensor list, None inside a list) is a TypeError naming
the op and the argument (through torch.ops, None for a tensor is a RuntimeError
naming both), and a tensor of a dtype outside its set is a
RuntimeError naming the argument and the dtypes it takes. The dtype rows also
hold the descriptions to the C++ checks: a description that names the wrong
dtype set fails here.
"""

from __future__ import annotations

from row_kit import Row, apply, set_

from sgl_meta import _op

_DTYPE_TEXT = {
    _op.INT32: "int32 (torch.int32)",
    _op.INT64: "int64 (torch.int64)",
    _op.INDEX: "int32 or int64 (torch.int32 or torch.int64)",
    _op.BOOL: "bool (torch.bool)",
    _op.FLOATING: "bfloat16, float16 or float32 (torch.bfloat16, torch.float16 or torch.float32)",
}
# Dtypes outside each set (Tensor method names): one far from it, then one of
# the same kind (the likely mistake).
_OUTSIDE = {
    _op.INT32: ("float", "long"),
    _op.INT64: ("float", "int"),
    _op.INDEX: ("float", "short"),
    _op.BOOL: ("float", "int"),
    _op.FLOATING: ("int", "double"),
}


def _list_element(name, value):
    def edit(kw):
        kw[name] = [value, *kw[name][1:]]

    return edit


def _rows_of(op: _op.Op, base: dict) -> list[Row]:
    rows = []
    # The base call through torch.ops: a list the public function takes as None
    # (an absent field) is the empty list there.
    empty_lists = {a.name: [] for a in op.args if a.kind == "Tensor[]" and a.name in base and base[a.name] is None}
    through_dispatcher = all(base.get(a.name) is not None or a.kind.endswith("?") or a.name in empty_lists
                             for a in op.args if a.name in base)

    def row(id, edit, text, raises, dispatcher=False):
        rows.append(Row(id=f"{op.name}/described: {id}", op=op.name, edit=edit, names=(text,), raises=(raises,),
                        dispatcher=dispatcher))

    for a in op.args:
        name, given = a.name, base.get(a.name)
        if a.kind in ("Tensor", "Tensor?"):
            row(f"{name} = 5", set_(**{name: 5}), f"{name} must be a Tensor, got int", TypeError)
            row(f"{name} = [[1, 2]]", set_(**{name: [[1, 2]]}), f"{name} must be a Tensor, got list", TypeError)
            if a.kind == "Tensor" and a.default is _op.REQUIRED:
                row(f"{name} = None", set_(**{name: None}), f"{name} must be a Tensor, got NoneType", TypeError)
                if through_dispatcher:  # torch.ops hands None over as an undefined tensor: the op names it
                    row(f"{name} = None through torch.ops", set_(**empty_lists, **{name: None}),
                        f"{name} must be a Tensor, got None", RuntimeError, dispatcher=True)
            if given is not None:
                expected = f"{name} must have dtype {_DTYPE_TEXT[a.dtypes]}"
                for cast in _OUTSIDE[a.dtypes]:
                    dtype = str(getattr(given, cast)().dtype).removeprefix("torch.")
                    row(f"{name} dtype {dtype}", apply(name, lambda t, c=cast: getattr(t, c)()), expected,
                        RuntimeError)
        elif a.kind == "Tensor[]" and given:
            row(f"{name} as a Tensor", set_(**{name: given[0]}), f"{name} must be a list of tensors", TypeError)
            row(f"{name}[0] None", _list_element(name, None), f"{name}[0] must be a Tensor, got NoneType", TypeError)
        elif a.kind in ("int", "int?"):
            row(f"{name} = 4.0", set_(**{name: 4.0}), f"{name} must be an int, got float", TypeError)
            row(f"{name} = True", set_(**{name: True}), f"{name} must be an int, got bool", TypeError)
            row(f"{name} = '4'", set_(**{name: "4"}), f"{name} must be an int, got str", TypeError)
            row(f"{name} = 2**64", set_(**{name: 2**64}), f"{name} = {2**64} is outside the int64 range",
                RuntimeError)
        elif a.kind == "int[]" and given:
            row(f"{name}[0] float", _list_element(name, 1.5), f"{name}[0] must be an int, got float", TypeError)
            row(f"{name}[0] = -2**63 - 1", _list_element(name, -(2**63) - 1),
                f"{name}[0] = {-(2**63) - 1} is outside the int64 range", RuntimeError)
        elif a.kind == "bool":
            row(f"{name} = 1", set_(**{name: 1}), f"{name} must be a bool, got int", TypeError)
    return rows


def described_rows(bases: dict, gen, device="cpu") -> list[Row]:
    """Rows for every op with a base call in ``bases`` (op name -> maker)."""
    rows = []
    for name, op in _op.OPS.items():
        if name in bases:
            rows.extend(_rows_of(op, bases[name](gen, device)))
    return rows
