"""Blocking work in a thread pool, with results handed back to the event loop through a pipe."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Handoff:
    """Runs functions in worker threads; `await handoff.run(fn, timeout)` gets the result or the exception.

    The worker wakes the loop with `os.write` on a pipe, which releases the GIL during the system
    call: on a busy machine the loop thread can take the GIL at once instead of waiting for the
    worker to be scheduled again (asyncio's thread-safe wake-up keeps it).
    """

    def __init__(self, max_workers: int) -> None:
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="toolgym-env")
        self._done: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(self._read_fd)
            loop.add_reader(self._read_fd, self._drain)
            self._loop = loop
        return loop

    async def run(self, fn: Callable[[], T], timeout: float, on_done: Callable[[], None] | None = None) -> T:
        """`fn()` in a worker thread; `on_done` runs in the worker as soon as `fn` returns or raises.

        After `timeout` seconds this raises `asyncio.TimeoutError`; the thread cannot be stopped and
        finishes on its own (then `on_done` runs).
        """
        loop = self._bind()
        future: asyncio.Future[T] = loop.create_future()
        self.executor.submit(self._job, fn, future, on_done)
        timer = loop.call_later(timeout, _expire, future)
        try:
            return await future
        finally:
            timer.cancel()

    def _job(self, fn: Callable[[], Any], future: asyncio.Future[Any], on_done: Callable[[], None] | None) -> None:
        try:
            outcome: tuple[asyncio.Future[Any], bool, Any] = (future, True, fn())
        except BaseException as exc:  # handed to the awaiting coroutine
            outcome = (future, False, exc)
        finally:
            if on_done is not None:
                on_done()
        self._done.append(outcome)
        os.write(self._write_fd, b"\0")

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read_fd, 65536)
        while self._done:
            future, ok, value = self._done.popleft()
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def shutdown(self) -> None:
        """Stop taking work and close the pipe."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._read_fd)
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())
