"""A small name → object registry that can import the modules that fill it on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to plug-ins. `autoload` modules are imported before the first lookup.

    Method modules under `toolgym.trainers.methods` register their plug-ins at import time, so
    `losses.REGISTRY` autoloads that package: every registered name is visible from the
    public registry path without importing the method modules first.
    """

    def __init__(self, kind: str, autoload: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._autoload = autoload
        self._loaded = not autoload

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """Register `obj` under `name`; without `obj`, return a decorator."""
        if obj is not None:
            self._add(name, obj)
            return obj

        def decorator(o: T) -> T:
            self._add(name, o)
            return o

        return decorator

    def _add(self, name: str, obj: T) -> None:
        if name in self._items and self._items[name] is not obj:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._autoload:
                importlib.import_module(module)

    def get(self, name: str) -> T:
        """The plug-in named `name`; a KeyError lists the known names."""
        self._load()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items))
            raise KeyError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        """All registered names, sorted."""
        self._load()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load()
        return len(self._items)
