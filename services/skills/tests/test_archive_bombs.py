"""Archive bombs sent to a real skills server process: refused before they inflate, and the
process's peak memory (VmHWM) stays far below what they would inflate to."""

from __future__ import annotations

import functools
import gzip
import os
import stat
import struct
import subprocess
import sys
import tarfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from crayfish.skills.v1 import skills_pb2, skills_pb2_grpc
from crayfish_common.healthcheck import check

from devstack.launcher import free_port

MIB = 1 << 20
GIB = 1 << 30
SKILL = b"---\nname: bomb\ndescription: Inflates.\n---\nBody.\n"


@functools.cache
def zero_gib() -> tuple[bytes, int]:
    """(raw deflate stream of 1 GiB of zero bytes, about 1 MB; its CRC-32). One fully flushed
    piece repeated: each piece is independent of what came before it."""
    piece = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = piece.compress(bytes(MIB)) + piece.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    crc, zero = 0, bytes(MIB)
    for _ in range(GIB // MIB):
        crc = zlib.crc32(zero, crc)
    return block * (GIB // MIB) + end, crc


def zip_with_link_bomb() -> bytes:
    """A valid zip: SKILL.md and a symlink entry whose target inflates to 1 GiB."""
    deflated, crc = zero_gib()
    entries = [
        ("bomb/SKILL.md", 0, SKILL, zlib.crc32(SKILL), len(SKILL), 0o100644),
        ("bomb/link", 8, deflated, crc, GIB, stat.S_IFLNK | 0o777),
    ]
    local, central = bytearray(), bytearray()
    for name, method, data, crc32, size, mode in entries:
        raw, offset = name.encode(), len(local)
        common = (20, 0, method, 0, 0x21, crc32, len(data), size, len(raw), 0)
        local += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", *common) + raw + data
        central += struct.pack(
            "<4sH" + "HHHHHIIIHH" + "HHHII",
            b"PK\x01\x02",
            0x031E,
            *common,
            0,
            0,
            0,
            mode << 16,
            offset,
        )
        central += raw
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 2, 2, len(central), len(local), 0)
    return bytes(local + central + end)


def tar_gz_with_header_bomb(kind: bytes) -> bytes:
    """A valid .tar.gz whose first header (pax records or a GNU long name) is 1 GiB of zeros,
    then a SKILL.md: three gzip members, the middle one the precompressed zeros."""
    header = tarfile.TarInfo("././@PaxHeader" if kind == tarfile.XHDTYPE else "././@LongLink")
    header.type, header.size = kind, GIB
    skill = tarfile.TarInfo("bomb/SKILL.md")
    skill.size = len(SKILL)
    tail = skill.tobuf(format=tarfile.USTAR_FORMAT) + SKILL.ljust(512, b"\0") + bytes(1024)
    deflated, crc = zero_gib()
    zeros = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + deflated + struct.pack("<II", crc, GIB)
    first = gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT), mtime=0)
    return first + zeros + gzip.compress(tail, mtime=0)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`python -m skills` as a child process on a free loopback port."""
    port = free_port()
    env = {
        **os.environ,
        "SKILLS_HOST": "127.0.0.1",
        "SKILLS_PORT": str(port),
        "SKILLS_WORKSPACE": str(tmp_path / "workspace"),
        "SKILLS_DATA_DIR": str(tmp_path / "data"),
        "SKILLS_WATCH": "false",
        "SKILLS_TOOL_RUNNER_ADDR": "",
        "TOOL_RUNNER_ADDR": "",
    }
    process = subprocess.Popen([sys.executable, "-m", "skills"], env=env)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not check(address, "crayfish.skills.v1.SkillsService", timeout=1):
            assert process.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        yield process, address
    finally:
        process.terminate()
        process.wait(10)


def peak_mib(process: subprocess.Popen[bytes]) -> float:
    """The process's peak resident memory so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def test_archive_bombs_are_refused_before_they_inflate(server, tmp_path: Path) -> None:
    process, address = server
    bombs = {
        "zip symlink": (zip_with_link_bomb(), "bomb.zip", "symlink 'bomb/link': its target is"),
        "tar pax header": (tar_gz_with_header_bomb(tarfile.XHDTYPE), "bomb.tgz", "tar header"),
        "tar long name": (
            tar_gz_with_header_bomb(tarfile.GNUTYPE_LONGNAME),
            "bomb.tgz",
            "tar header",
        ),
    }
    with grpc.insecure_channel(address) as channel:
        stub = skills_pb2_grpc.SkillsServiceStub(channel)
        stub.ListSkills(skills_pb2.ListSkillsRequest(), timeout=10)
        baseline = peak_mib(process)
        for case, (data, name, reason) in bombs.items():
            assert len(data) < 2 * MIB, case
            request = skills_pb2.InstallSkillRequest(archive=data, archive_name=name)
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as error:
                stub.InstallSkill(request, timeout=60)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (case, error.value)
            assert reason in error.value.details(), (case, error.value.details())
            print(
                f"\n{case}: {len(data)} bytes inflating to 1 GiB refused in "
                f"{time.monotonic() - started:.2f} s: {error.value.details()}"
            )
        peak = peak_mib(process)
        listed = stub.ListSkills(skills_pb2.ListSkillsRequest(), timeout=10)
    print(f"skills server peak memory: {baseline:.0f} MiB before, {peak:.0f} MiB after the bombs")
    assert peak - baseline < 300, (baseline, peak)
    assert process.poll() is None and "git" in {s.name for s in listed.skills}
    assert not any((tmp_path / "data" / "managed").iterdir())
