"""A private Docker engine for tests and the bench, plus a sandbox image built from host files.

Nothing can be pulled here, so the image is `docker import`ed from a tarball of a minimal rootfs:
a list of host programs (sh, coreutils, procps, util-linux, python3 and its stdlib) with the
shared libraries `ldd` names. dockerd gets its own data/exec roots and socket and never touches
the host network (no bridge, no iptables).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

IMAGE = "crayfish-sandbox:test"
PROGRAMS = [
    "sh",
    "dash",
    "cat",
    "ls",
    "ln",
    "head",
    "tail",
    "tr",
    "id",
    "env",
    "sleep",
    "seq",
    "yes",
    "echo",
    "true",
    "false",
    "touch",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "wc",
    "sort",
    "pwd",
    "date",
    "hostname",
    "nohup",
    "chmod",
    "readlink",
    "stat",
    "grep",
    "sed",
    "ps",
    "kill",
    "pkill",
    "setsid",
    "unshare",
    "mount",
    "prlimit",
    "timeout",
    "python3",
]
PY_SKIP = {
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "__pycache__",
    "site-packages",
    "dist-packages",
}
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def _libs(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1:
            found.add(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):
            found.add(parts[0])
    return {p for p in found if p.startswith("/")}


class _RootfsTar:
    """A tarball being assembled; paths are added once, parents on demand."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buffer, mode="w")
        self.seen: set[str] = set()

    def add_dir(self, path: str, mode: int = 0o755) -> None:
        if path in self.seen or path in ("", "/"):
            return
        self.add_dir(os.path.dirname(path))
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, mode
        self.tar.addfile(info)
        self.seen.add(path)

    def add_file(self, host: str, path: str | None = None) -> None:
        path = path or os.path.realpath(host)
        if path in self.seen:
            return
        self.add_dir(os.path.dirname(path))
        self.tar.add(os.path.realpath(host), arcname=path.lstrip("/"), recursive=False)
        self.seen.add(path)

    def add_link(self, path: str, target: str) -> None:
        if path in self.seen:
            return
        self.add_dir(os.path.dirname(path))
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.linkname = tarfile.SYMTYPE, target
        self.tar.addfile(info)
        self.seen.add(path)

    def add_text(self, path: str, text: str) -> None:
        self.add_dir(os.path.dirname(path))
        data = text.encode()
        info = tarfile.TarInfo(path.lstrip("/"))
        info.size, info.mode = len(data), 0o644
        self.tar.addfile(info, io.BytesIO(data))
        self.seen.add(path)

    def add_lib(self, path: str) -> None:
        """A library at its real path, plus a link where ldd named it (merged-/usr aware)."""
        real = os.path.realpath(path)
        self.add_file(real)
        named = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if named != real:
            self.add_link(named, real)


def build_rootfs() -> bytes:
    """The tarball of the sandbox image's root filesystem."""
    fs = _RootfsTar()
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            fs.add_link(f"/{link}", os.readlink(f"/{link}"))
    binaries = [shutil.which(p, path="/usr/bin:/bin:/usr/sbin:/sbin") for p in PROGRAMS]
    libs: set[str] = set()
    for name, binary in zip(PROGRAMS, binaries, strict=True):
        if binary is None:
            continue
        fs.add_file(binary, f"/usr/bin/{name}")
        libs |= _libs(binary)
    pyreal = os.path.realpath("/usr/bin/python3")
    stdlib = f"/usr/lib/{os.path.basename(pyreal)}"
    fs.add_file(pyreal, f"/usr/bin/{os.path.basename(pyreal)}")
    for folder, dirs, names in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in PY_SKIP]
        for name in names:
            host = os.path.join(folder, name)
            fs.add_file(host, host)
            if name.endswith(".so"):
                libs |= _libs(host)
    for lib in sorted(libs):
        fs.add_lib(lib)
    fs.add_text("/etc/passwd", "root:x:0:0::/root:/bin/sh\nsandbox:x:65534:65534::/tmp:/bin/sh\n")
    fs.add_text("/etc/group", "root:x:0:\nsandbox:x:65534:\n")
    fs.add_text("/etc/hosts", "127.0.0.1 localhost\n")
    fs.add_dir("/tmp", 0o1777)  # docker copies this mode onto the tmpfs mounted there
    for folder in ("/workspace", "/proc", "/dev", "/sys"):
        fs.add_dir(folder)
    fs.tar.close()
    return fs.buffer.getvalue()


class LocalDockerd:
    """dockerd as a child process with private roots; stop() removes everything it made."""

    def __init__(self, root: Path):
        self.root = root
        self.socket = root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.image = IMAGE
        self.proc: subprocess.Popen[bytes] | None = None
        self.reason = ""

    @classmethod
    def start_or_none(cls, timeout: float = 60.0) -> LocalDockerd | None:
        """A running engine with the image, or None (the reason is logged)."""
        engine = cls(Path(tempfile.mkdtemp(prefix="crayfish-dockerd-", dir="/tmp")))
        try:
            engine._start(timeout)
            engine._build_image()
            return engine
        except Exception as exc:  # any failure means: no engine here
            engine.reason = f"{type(exc).__name__}: {exc}"
            log.warning("no local Docker engine: %s", engine.reason)
            cls.last_reason = engine.reason
            engine.stop()
            return None

    last_reason = ""

    @property
    def namespace(self) -> str:
        """The engine's containerd namespace and cgroup parent.

        containerd namespaces allow [A-Za-z0-9] runs joined by single [._-]; mkdtemp's random
        suffix may contain "_" next to "-", so only the letters and digits of it are kept.
        """
        return "crayfish-" + "".join(c for c in self.root.name if c.isalnum())

    def _start(self, timeout: float) -> None:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise RuntimeError("dockerd is not installed (apt-get install docker.io)")
        if os.geteuid() != 0:
            raise RuntimeError("dockerd needs root here")
        ns = self.namespace
        args = [
            dockerd,
            "--data-root",
            str(self.root / "data"),
            "--exec-root",
            str(self.root / "exec"),
            "-H",
            self.host,
            "--pidfile",
            str(self.root / "pid"),
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--cgroup-parent",
            f"/{ns}",
            "--containerd-namespace",
            ns,
            "--containerd-plugins-namespace",
            f"{ns}-plugins",
        ]
        log_file = (self.root / "dockerd.log").open("wb")
        self.proc = subprocess.Popen(
            args, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        import docker

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited: {self._log_tail()}")
            with contextlib.suppress(Exception):
                docker.DockerClient(base_url=self.host, timeout=5).ping()
                return
            time.sleep(0.2)
        raise RuntimeError(f"dockerd did not answer in {timeout:.0f}s: {self._log_tail()}")

    def container(self, image: str, **kwargs: Any) -> Any:
        """A testcontainers `DockerContainer` of image on this engine (start it with `with`).

        Ryuk, testcontainers' reaper, is off: its image cannot be pulled here (DESIGN §4), and
        `stop()` removes every container of this engine anyway."""
        from testcontainers.core.config import testcontainers_config
        from testcontainers.core.container import DockerContainer

        testcontainers_config.ryuk_disabled = True
        client = {"environment": {"DOCKER_HOST": self.host}, "timeout": 120}
        return DockerContainer(image, docker_client_kw=client, **kwargs)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "dockerd.log").read_text()[-800:]
        return ""

    def _build_image(self) -> None:
        import docker

        client = docker.DockerClient(base_url=self.host, timeout=120)
        repo, tag = IMAGE.split(":")
        client.api.import_image_from_data(
            build_rootfs(),
            repository=repo,
            tag=tag,
            changes=[f"ENV PATH={SANDBOX_PATH}", "USER 65534:65534", "WORKDIR /workspace"],
        )
        client.images.get(IMAGE)
        # A container must really run (cgroups, mounts, seccomp) or the engine is no use here.
        client.containers.run(IMAGE, ["true"], remove=True, network_mode="none")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                import docker

                client = docker.DockerClient(base_url=self.host, timeout=10)
                for container in client.containers.list(all=True):
                    container.remove(force=True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        # The engine leaves its (empty) parent cgroup in every hierarchy.
        for folder in Path("/sys/fs/cgroup").glob(f"*/{self.namespace}"):
            with contextlib.suppress(OSError):
                folder.rmdir()
