"""A small seccomp filter for bwrap: no new user namespaces and no rarely needed kernel attack surface."""

from __future__ import annotations

import errno
import logging
import os
import platform
import struct

logger = logging.getLogger(__name__)

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K, _JGE_K, _JSET_K = 0x15, 0x35, 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
# seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16

# Syscalls refused with EPERM: namespaces (and so mount/chroot in a new user namespace), keyrings,
# eBPF, perf, userfaultfd, io_uring. Docker's default profile refuses these too.
_DENIED = ("unshare", "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd")
_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "clone": 56, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248,
            "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
            "io_uring_setup": 425, "clone3": 435,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "clone": 220, "unshare": 97, "setns": 268, "keyctl": 219, "add_key": 217,
            "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
            "io_uring_setup": 425, "clone3": 435,
        },
    ),
}  # fmt: skip


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None) -> bytes | None:
    """Return the BPF program for ``machine`` (default: this one), or None if unsupported."""
    machine = machine or platform.machine()
    if machine not in _TABLES:
        return None
    arch, numbers = _TABLES[machine]
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    denied = [numbers[name] for name in (*_DENIED, "io_uring_setup")]
    prog = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, enosys),  # foreign ABI (e.g. 32-bit calls): refuse everything
        _insn(_LD_W_ABS, _OFF_NR),
        _insn(_JGE_K, _X32_BIT, jf=1),
        _insn(_RET_K, enosys),  # x32 ABI
        _insn(_JEQ_K, numbers["clone3"], jf=1),
        _insn(_RET_K, enosys),  # clone3 flags live in memory BPF cannot read; libc falls back to clone
        _insn(_JEQ_K, numbers["clone"], jf=4),
        _insn(_LD_W_ABS, _OFF_ARG0),  # clone flags (low 32 bits)
        _insn(_JSET_K, _CLONE_NEWUSER, jf=1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    for number in denied:
        prog += [_insn(_JEQ_K, number, jf=1), _insn(_RET_K, eperm)]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)


def filter_fd() -> int | None:
    """Return a readable fd holding the compiled filter (for ``bwrap --seccomp FD``)."""
    program = build_filter()
    if program is None:
        logger.warning("no seccomp filter for %s; the sandbox relies on namespaces alone", platform.machine())
        return None
    read_end, write_end = os.pipe()
    os.write(write_end, program)
    os.close(write_end)
    return read_end
