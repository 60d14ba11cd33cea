"""The plugin on and off in one process, so the two sides can be measured step by step in turn.

The plugin is applied the way SGLang's ``load_plugins()`` does it: our
``register()`` then ``HookRegistry.apply_hooks()``. HookRegistry patches
attributes in place (the target, plus every module holding a
``from X import Y`` copy) and keeps no way back, so :class:`Switch` records
what it changed: every module attribute and every attribute of a hooked
class that differs after the hooks were applied. ``off()`` / ``on()`` then set
those attributes to SGLang's or to the hooked values. Modules imported later
(a backend's lazy imports) copy whatever is current; :meth:`Switch.refresh`
finds those copies too.
"""

from __future__ import annotations

import sys
import types


def _module_bindings() -> dict:
    """``(module, name) -> value`` for every attribute of every loaded module."""
    out = {}
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for name, value in items:
            out[(module, name)] = value
    return out


def _class_bindings(classes) -> dict:
    return {(cls, name): value for cls in classes for name, value in list(vars(cls).items())}


def _hooked_classes() -> list:
    """The classes whose methods the plugin's hooks target (``module.Class.method``)."""
    from ...sglang import plugin

    usable, _ = plugin.plan()
    classes = []
    for hook, _replacement in usable:
        owner_path, _, _attr = hook.target.rpartition(".")
        module_name, _, class_name = owner_path.rpartition(".")
        module = sys.modules.get(module_name)
        cls = getattr(module, class_name, None) if module is not None else None
        if isinstance(cls, type) and cls not in classes:
            classes.append(cls)
    return classes


class Switch:
    """SGLang's own attributes (:meth:`off`) or the plugin's (:meth:`on`)."""

    def __init__(self, changes: list):
        self._changes = changes  # [(owner, name, sglang_value, hooked_value)]
        self.state = "on"

    @classmethod
    def apply(cls, load=None) -> tuple["Switch", dict]:
        """Apply the plugin (left on) with ``load()`` (default: our ``register()``,
        then ``HookRegistry.apply_hooks()``; pass SGLang's ``load_plugins`` to go
        through its entry points); the switch and ``{"hooked": [...], "skipped": {name: why}}``."""
        from sglang.srt.plugins.hook_registry import HookRegistry

        from ...sglang import plugin

        why = plugin.inactive_reason()
        if why:
            raise RuntimeError(f"the plugin is inactive here: {why}")
        usable, skipped = plugin.plan()  # imports every target's module
        classes = _hooked_classes()
        before = {**_module_bindings(), **_class_bindings(classes)}
        if load is None:
            plugin.register()
            HookRegistry.apply_hooks()
        else:
            load()
        after = {**_module_bindings(), **_class_bindings(classes)}
        # HookRegistry's wrappers carry ``__wrapped__``; other attributes that
        # changed meanwhile (a config module's state) are not the plugin's.
        changes = [(owner, name, before[key], value) for key, value in after.items()
                   if key in before and before[key] is not value and hasattr(value, "__wrapped__")
                   for owner, name in [key]]
        hooks = {"hooked": [h.name for h, _ in usable], "skipped": {h.name: w for h, w in skipped}}
        return cls(changes), hooks

    def control(self) -> "Switch":
        """A switch that sets the same attributes as this one, SGLang's values
        on both sides: a run with it times SGLang against itself, every flip
        of a measured run included, so its on - off is the bench's own error."""
        self.off()
        control = Switch([(owner, name, sglang_value, sglang_value) for owner, name, sglang_value, _ in self._changes])
        control.state = "off"
        return control

    def refresh(self) -> None:
        """Record module copies made since (``from X import Y`` in modules imported later)."""
        current = {(owner, name) for owner, name, _, _ in self._changes}
        by_value = {}
        for owner, name, sglang_value, hooked_value in self._changes:
            by_value[id(sglang_value)] = (sglang_value, hooked_value)
            by_value[id(hooked_value)] = (sglang_value, hooked_value)
        for (owner, name), value in _module_bindings().items():
            pair = by_value.get(id(value))
            if pair is None or (owner, name) in current:
                continue
            self._changes.append((owner, name, pair[0], pair[1]))
            current.add((owner, name))
            # A copy made while the switch was the other way holds that side's value.
            setattr(owner, name, pair[0] if self.state == "off" else pair[1])

    def _set(self, which: int, state: str) -> None:
        if self.state == state:
            return
        for change in self._changes:
            setattr(change[0], change[1], change[which])
        self.state = state

    def off(self) -> None:
        self._set(2, "off")

    def on(self) -> None:
        self._set(3, "on")

    def __len__(self) -> int:
        return len(self._changes)
