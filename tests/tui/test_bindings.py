"""Every key binding of the dashboard has its own hand-written id and a tooltip (DESIGN.md §3).

The id is what a keymap names, so two bindings must never share one; the tooltip is what the
footer, the help and the command palette show. Every class in `tui/` that declares bindings
is checked, so a new screen or widget is held to it too.
"""

from __future__ import annotations

import importlib
import pkgutil

from textual.binding import Binding

import tui


def declared_bindings() -> list[tuple[str, Binding]]:
    """(class name, binding) for every binding a class in `tui/` declares itself."""
    found: list[tuple[str, Binding]] = []
    for module_info in pkgutil.walk_packages(tui.__path__, "tui."):
        if module_info.name == "tui.__main__":  # running it is the command itself
            continue
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                for binding in vars(value).get("BINDINGS", ()):
                    assert isinstance(binding, Binding), (value.__name__, binding)
                    found.append((value.__name__, binding))
    return found


def test_the_bindings_are_found() -> None:
    owners = {owner for owner, _ in declared_bindings()}
    assert {"DashboardApp", "RolloutTable", "ConfirmScreen", "QuitScreen"} <= owners


def test_every_binding_has_a_unique_id() -> None:
    assert all(b.id for _, b in declared_bindings()), [
        (owner, b.key) for owner, b in declared_bindings() if not b.id
    ]
    ids = [b.id or "" for _, b in declared_bindings()]
    assert sorted(ids) == sorted(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


def test_every_binding_has_a_tooltip() -> None:
    missing = [(owner, b.id) for owner, b in declared_bindings() if not b.tooltip]
    assert missing == []
