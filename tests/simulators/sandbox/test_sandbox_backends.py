"""Backend selection, limits validation, cgroups, seccomp, and the Docker channel over a fake engine."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import pytest

from toolgym.simulators.sandbox import (
    SandboxLimits,
    SandboxUnavailable,
    _proc,
    available_backends,
    get_backend,
)
from toolgym.simulators.sandbox._proc import UID_RANGE, host_python, rlimits_for, runner_source, tasks_of_uid
from toolgym.simulators.sandbox.bwrap import BwrapSandbox
from toolgym.simulators.sandbox.cgroup import CGROUP_ROOT, Cgroup
from toolgym.simulators.sandbox.docker import DockerSandbox, StreamDemuxer
from toolgym.simulators.sandbox.local import SubprocessSandbox
from toolgym.simulators.sandbox.seccomp import build_filter


def test_auto_prefers_bubblewrap_here():
    assert available_backends()[0] == "bwrap"
    assert isinstance(get_backend("auto"), BwrapSandbox)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown sandbox backend 'vm'"):
        get_backend("vm")


def test_subprocess_fallback_warns():
    with pytest.warns(RuntimeWarning, match="does NOT isolate"):
        sandbox = get_backend("subprocess")
    assert isinstance(sandbox, SubprocessSandbox)


def test_missing_bwrap_binary_is_unavailable():
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        BwrapSandbox(bwrap="no-such-bwrap-binary")


def test_docker_without_engine_is_unavailable(monkeypatch):
    from toolgym.simulators.sandbox import backends

    monkeypatch.setattr(backends, "backend_works", lambda name: name != "docker")
    with pytest.raises(SandboxUnavailable, match="docker"):
        get_backend("docker")


@pytest.mark.parametrize("field", ["wall_time", "memory_bytes", "max_processes", "kill_grace"])
@pytest.mark.parametrize("value", [0, -1, "10", True])
def test_limits_reject_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        SandboxLimits(**{field: value})


def test_limits_are_serializable():
    limits = SandboxLimits(wall_time=2)
    assert SandboxLimits(**limits.to_dict()) == limits
    with pytest.raises(ValueError, match="session_cpu_time"):
        SandboxLimits(cpu_time=100, session_cpu_time=10)


def test_bwrap_command_hides_the_host():
    sandbox = BwrapSandbox()
    argv = sandbox.command(["python"], uid=2_000_001)
    joined = " ".join(argv)
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert "/etc/shadow" not in joined and "--bind " not in joined  # read-only binds only
    assert "--reuid=2000001" in argv and argv[-1] == "python"
    for prefix in host_python()[1]:
        assert prefix in argv


def test_seccomp_filter_programs():
    for machine in ("x86_64", "aarch64"):
        program = build_filter(machine)
        assert program is not None and len(program) % 8 == 0
        assert struct.unpack_from("=HBBI", program, len(program) - 8)[3] == 0x7FFF0000  # ends in ALLOW
    assert build_filter("sparc") is None


def test_bwrap_python_paths_are_importable_read_only(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir(mode=0o755)
    (lib / "helper.py").write_text("def answer():\n    return 42\n")
    lib.chmod(0o755)
    sandbox = BwrapSandbox(SandboxLimits(wall_time=10), python_paths=[str(lib)])
    result = sandbox.run(f"import helper\nprint(helper.answer())\nopen({str(lib / 'x.py')!r}, 'w')")
    assert result.stdout == "42\n" and "Read-only file system" in result.stderr
    assert sorted(p.name for p in lib.iterdir()) == ["helper.py"]


def test_bwrap_interpreter_uses_its_own_standard_library():
    result = BwrapSandbox(SandboxLimits(wall_time=10)).run("import os, sys\nprint(sys.prefix, os.__file__)")
    prefix, os_file = result.stdout.split()
    assert prefix == os.path.realpath(sys.base_prefix) and os_file.startswith(prefix)


def test_seccomp_refuses_new_user_namespaces():
    code = "import subprocess\nprint(subprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode)"
    limits = SandboxLimits(wall_time=10)
    assert BwrapSandbox(limits, use_seccomp=False).run(code).stdout == "0\n"  # the kernel alone would allow it
    assert BwrapSandbox(limits).run(code).stdout == "1\n"


def test_runner_kills_strays_only_inside_a_private_pid_namespace():
    from toolgym.simulators.sandbox import _runner

    # Here (the host's PID namespace, as root) kill(-1) would hit every process: never allowed.
    assert not _runner._may_kill_strays()
    probe = "import sys\nsys.modules['__main__']._may_kill_strays()"  # the runner is __main__ inside
    assert get_backend("bwrap", SandboxLimits(wall_time=10)).run(probe).stdout == "True\n"
    with pytest.warns(RuntimeWarning):
        fallback = get_backend("subprocess", SandboxLimits(wall_time=10))
    assert fallback.run(probe).stdout == "False\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback drops privileges only when the host runs as root")
def test_subprocess_fallback_drops_to_its_own_uid_so_the_process_limit_binds():
    with pytest.warns(RuntimeWarning):
        sandbox = get_backend("subprocess", SandboxLimits(wall_time=10, max_processes=4))
    code = (
        "import os, time\n"
        "refused, kids = 0, []\n"
        "for _ in range(8):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        refused += 1\n"
        "        continue\n"
        "    if pid == 0:\n"
        "        time.sleep(0.3)\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids:\n"
        "    os.waitpid(pid, 0)\n"
        "print(os.getuid(), refused)"
    )
    uid, refused = map(int, sandbox.run(code).stdout.split())
    assert UID_RANGE[0] <= uid < UID_RANGE[1] and refused >= 5
    with sandbox.open_session() as first, sandbox.open_session() as second:
        pid = int(first.run("import os; os.getpid()").stdout)
        probe = second.run(f"import os\ntry:\n    os.kill({pid}, 0)\nexcept OSError as e:\n    print(type(e).__name__)")
        assert probe.stdout == "PermissionError\n"  # one fallback sandbox cannot signal another


def test_process_limit_on_a_shared_uid_leaves_room_for_the_sandbox(monkeypatch):
    # As a non-root user the code runs under the caller's own uid: RLIMIT_NPROC counts the
    # caller's tasks too, so the sandbox's budget is added to them.
    assert tasks_of_uid(os.getuid()) >= threading.active_count()
    limits = SandboxLimits(max_processes=8)
    assert rlimits_for(limits)[resource.RLIMIT_NPROC] == (8, 8)
    monkeypatch.setattr(_proc, "tasks_of_uid", lambda uid: 100)
    assert rlimits_for(limits, shared_uid=True)[resource.RLIMIT_NPROC] == (108, 108)


def test_cgroup_files_are_written(tmp_path):
    for controller in ("memory", "pids"):
        (tmp_path / controller).mkdir()
    limits = SandboxLimits(max_processes=10, memory_bytes=100 * 2**20, disk_bytes=2**20)
    group = Cgroup.create(limits, root=tmp_path)
    assert group is not None and len(group.dirs) == 2
    memory_dir, pids_dir = group.dirs
    assert (pids_dir / "pids.max").read_text() == "14"
    assert int((memory_dir / "memory.limit_in_bytes").read_text()) == 103 * 2**20


def test_busy_cgroup_is_removed_in_the_background(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "process").write_text("")  # a non-empty directory refuses rmdir, like a busy cgroup
    Cgroup([busy]).remove()  # returns after a short wait
    assert busy.exists()
    (busy / "process").unlink()  # the "process" exits
    deadline = time.monotonic() + 5
    while busy.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not busy.exists()


def test_cgroup_unavailable_returns_none(tmp_path):
    assert Cgroup.create(SandboxLimits(), root=tmp_path / "missing") is None


@pytest.mark.skipif(not os.access(CGROUP_ROOT / "pids", os.W_OK), reason="needs a writable cgroup v1 pids controller")
def test_bwrap_session_lives_in_its_own_cgroup():
    parent = CGROUP_ROOT / "pids" / "toolgym-sandbox"
    mine = lambda: {p for p in parent.glob(f"{os.getpid()}-*")}  # noqa: E731
    before = mine() if parent.exists() else set()
    with BwrapSandbox(SandboxLimits(max_processes=20)).open_session() as session:
        new = mine() - before
        assert len(new) == 1
        group = new.pop()
        assert (group / "pids.max").read_text().strip() == "24"
        assert len((group / "cgroup.procs").read_text().split()) >= 2  # bwrap + the interpreter
        assert session.run("1").ok
    deadline = time.monotonic() + 10
    while group.exists() and time.monotonic() < deadline:  # removed once its processes are gone
        time.sleep(0.05)
    assert not group.exists()


def test_stream_demuxer_splits_frames():
    frames = b"".join(struct.pack(">BxxxI", s, len(p)) + p for s, p in [(1, b"out"), (2, b"err"), (1, b"more")])
    demux = StreamDemuxer()
    assert demux.feed(frames[:5]) == (b"", b"")  # a partial header waits
    assert demux.feed(frames[5:13]) == (b"out", b"")
    assert demux.feed(frames[13:]) == (b"more", b"err")


class _FakeContainer:
    """Stands in for a docker container: runs the command as a local process behind a socket."""

    def __init__(self, command: list[str], options: dict[str, Any]) -> None:
        self.command, self.options = command, options
        self.attrs: dict[str, Any] = {"State": {"ExitCode": None}}
        self._ours, self._theirs = socket.socketpair()
        self.proc: subprocess.Popen[bytes] | None = None
        self.removed = False

    def attach_socket(self, params: dict[str, int]) -> socket.socket:
        assert params == {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        return self._ours

    def start(self) -> None:
        python, *args = self.command
        argv = [host_python()[0], *args]
        self.tmp = tempfile.mkdtemp(prefix="toolgym-fake-container-")
        # TMPDIR: the runner's capture files go here; GPG_KEY: images bring variables of their own
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": self.tmp, "GPG_KEY": "from-the-image"}
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=self.tmp, env=env)
        threading.Thread(target=self._pump_in, daemon=True).start()
        threading.Thread(target=self._pump_out, daemon=True).start()

    def _pump_in(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        while data := self._theirs.recv(65536):
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def _pump_out(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while data := os.read(self.proc.stdout.fileno(), 65536):
            for i in range(0, len(data), 7):  # small frames, split at odd places
                chunk = data[i : i + 7]
                self._theirs.sendall(struct.pack(">BxxxI", 1, len(chunk)) + chunk)
            self._theirs.sendall(struct.pack(">BxxxI", 2, 5) + b"noise")
        self._theirs.shutdown(socket.SHUT_RDWR)  # EOF for the host even while _pump_in blocks

    def reload(self) -> None:
        if self.proc is not None:
            self.attrs["State"]["ExitCode"] = self.proc.poll()

    def remove(self, force: bool) -> None:
        assert force
        self.removed = True
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


class _FakeDockerClient:
    def __init__(self) -> None:
        self.created: list[_FakeContainer] = []
        self.containers = self

    def create(self, image: str, command: list[str], **options: Any) -> _FakeContainer:
        container = _FakeContainer(command, {"image": image, **options})
        self.created.append(container)
        return container


def test_docker_backend_over_a_fake_engine():
    client = _FakeDockerClient()
    sandbox = DockerSandbox(SandboxLimits(wall_time=5, kill_grace=0.5), client=client)
    with sandbox.open_session() as session:
        assert session.run("x = 20").ok
        assert session.run("x * 2 + 2").stdout == "42\n"
        assert session.run("import os; sorted(os.environ)").stdout == "['PATH', 'TMPDIR']\n"
        assert session.run("import time\ntime.sleep(30)", timeout=0.3).timed_out
        crashed = session.run("import os\nos._exit(1)")
        assert crashed.killed_reason == "crashed"
        assert session.run("'again'").stdout == "'again'\n"
    assert all(container.removed for container in client.created) and len(client.created) == 2


def test_docker_container_options_enforce_the_limits():
    limits = SandboxLimits(max_processes=7, memory_bytes=300 * 2**20, disk_bytes=2**20)
    options = DockerSandbox(limits, client=_FakeDockerClient()).container_options()
    assert options["network_disabled"] and options["network_mode"] == "none"
    assert options["read_only"] and options["cap_drop"] == ["ALL"] and options["user"] == "65534:65534"
    assert options["pids_limit"] == 7 and options["mem_limit"] == 303 * 2**20
    assert options["command"][-1] == runner_source() and "no-new-privileges" in options["security_opt"]
    ulimits = {u["Name"]: u["Hard"] for u in options["ulimits"]}
    # processes: the container's own pids cgroup (an nproc ulimit would be shared by every
    # container running as uid 65534)
    assert ulimits["fsize"] == limits.file_size_bytes and "nproc" not in ulimits
    assert set(options["tmpfs"]) == {"/work", "/tmp"}


@pytest.mark.docker
def test_docker_backend_with_a_real_engine():
    from toolgym.simulators.sandbox.docker import docker_works

    if not docker_works():
        pytest.skip("no Docker engine answers here; test_docker_backend_over_a_fake_engine covers the code path")
    sandbox = get_backend("docker", SandboxLimits(wall_time=20))
    with sandbox.open_session() as session:
        assert session.run("x = 1").ok and session.run("x + 1").stdout == "2\n"
        assert session.run("import os; os.getuid()").stdout == "65534\n"
