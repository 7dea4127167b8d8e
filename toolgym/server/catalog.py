"""The catalog of servable env ids: docs and accepted kwargs read from each env class."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import typing
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from pydantic import TypeAdapter, ValidationError

from toolgym.envs.registration import ENV_IDS, register_envs
from toolgym.server.errors import ApiError

# ids that are never served: a server must not become a proxy to arbitrary URLs
NOT_SERVED = frozenset({"toolgym/Remote-v0"})
_MISSING = object()


@dataclass(frozen=True)
class KwargSpec:
    """One keyword argument an env accepts over HTTP."""

    name: str
    annotation: str
    default: Any
    adapter: TypeAdapter[Any]

    def describe(self) -> dict[str, Any]:
        """JSON description for `GET /v1/envs`."""
        out: dict[str, Any] = {"name": self.name, "type": self.annotation, "schema": self.adapter.json_schema()}
        if self.default is not _MISSING:
            out["default"] = self.default
        else:
            out["required"] = True
        return out


@dataclass(frozen=True)
class EnvEntry:
    """What the server knows about one env id."""

    env_id: str
    cls: type
    kwargs: dict[str, KwargSpec]
    registered_kwargs: dict[str, Any]

    def describe(self) -> dict[str, Any]:
        """JSON description for `GET /v1/envs`."""
        doc = inspect.getdoc(self.cls) or ""
        return {
            "id": self.env_id,
            "summary": doc.splitlines()[0] if doc else "",
            "doc": doc,
            "kwargs": [spec.describe() for spec in self.kwargs.values()],
        }


def served_ids() -> list[str]:
    """The env ids this server hosts, read from `ENV_IDS` now (others may have added ids)."""
    register_envs()
    return [env_id for env_id in ENV_IDS if env_id not in NOT_SERVED]


def lookup(env_id: str) -> EnvEntry:
    """The catalog entry of `env_id`, or a 400 error naming the known ids."""
    if env_id not in served_ids():
        raise ApiError(400, "unknown_env", f"unknown env id {env_id!r}; known ids: {served_ids()}")
    return _entry(env_id)


@functools.cache
def _entry(env_id: str) -> EnvEntry:
    spec = gym.spec(env_id)
    cls = _resolve(spec.entry_point)
    return EnvEntry(env_id, cls, _accepted_kwargs(cls), dict(spec.kwargs))


def _resolve(entry_point: Any) -> type:
    if not isinstance(entry_point, str):
        return entry_point  # type: ignore[no-any-return]
    module_name, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


def _accepted_kwargs(cls: type) -> dict[str, KwargSpec]:
    """Keyword parameters of `cls.__init__`, following `**kwargs` up the class hierarchy."""
    accepted: dict[str, KwargSpec] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass in (gym.Env, object):
            break
        passes_on = False
        for param in inspect.signature(init).parameters.values():
            if param.kind is param.VAR_KEYWORD:
                passes_on = True
            elif param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD) and param.name != "self":
                spec = _kwarg_spec(klass, init, param)
                if spec is not None and param.name not in accepted:
                    accepted[param.name] = spec
        if not passes_on:
            break
    return accepted


def _kwarg_spec(klass: type, init: Any, param: inspect.Parameter) -> KwargSpec | None:
    """A spec for `param`, or None when its type cannot come from JSON (e.g. Python objects)."""
    annotation = param.annotation
    if isinstance(annotation, str):
        namespace = {**vars(typing), **vars(sys.modules[klass.__module__])}
        try:
            annotation = eval(annotation, namespace)  # noqa: S307 - annotations of our own classes
        except Exception:
            return None
    if annotation is inspect.Parameter.empty:
        annotation = Any
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        adapter.json_schema()
    except Exception:
        return None
    default = _MISSING if param.default is inspect.Parameter.empty else param.default
    return KwargSpec(param.name, _type_name(param.annotation), default, adapter)


def _type_name(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "Any"
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def validate_kwargs(entry: EnvEntry, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Check names and types of client kwargs; a 400 error says what is wrong."""
    unknown = sorted(set(kwargs) - set(entry.kwargs))
    if unknown:
        raise ApiError(
            400, "invalid_kwargs", f"{entry.env_id} does not accept {unknown}; accepted: {sorted(entry.kwargs)}"
        )
    checked: dict[str, Any] = {}
    for name, value in kwargs.items():
        try:
            checked[name] = entry.kwargs[name].adapter.validate_python(value)
        except ValidationError as exc:
            message = exc.errors()[0].get("msg", "invalid value")
            raise ApiError(400, "invalid_kwargs", f"kwarg {name!r} of {entry.env_id}: {message}") from None
    return checked
