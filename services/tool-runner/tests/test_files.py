"""Host-side file tools directly: FIFOs, devices, caps, binary files, symlinks, fallback walk."""

from __future__ import annotations

import os
from pathlib import Path

import openpyxl
import pytest
from crayfish_common import safe_files
from crayfish_common.safe_files import FileRefused
from crayfish_common.tools import ToolError
from tool_runner import files, spreadsheet
from tool_runner.workspace import Workspace


@pytest.fixture
def ws(workspace: Path) -> Workspace:
    return Workspace(workspace)


def test_fifo_is_refused_without_blocking(ws, workspace):
    os.mkfifo(workspace / "pipe")
    with pytest.raises(FileRefused, match="not a regular file"):
        files.read_file(ws, {"path": "pipe"}, 1000)
    with pytest.raises(FileRefused, match="not a regular file"):
        files.write_file(ws, {"path": "pipe", "content": "x"}, 1000)


def test_device_symlink_and_socket_are_refused(ws, workspace):
    (workspace / "null").symlink_to("/dev/null")
    with pytest.raises(FileRefused, match="outside the workspace"):
        files.read_file(ws, {"path": "null"}, 1000)


def test_oversize_reads_and_writes_are_refused(ws, workspace):
    (workspace / "big.txt").write_text("x" * 5000)
    with pytest.raises(FileRefused, match="read limit"):
        files.read_file(ws, {"path": "big.txt"}, 1000)
    with pytest.raises(FileRefused, match="limit"):
        files.write_file(ws, {"path": "new.txt", "content": "y" * 2000}, 1000)
    assert not (workspace / "new.txt").exists()


def test_binary_files_are_not_dumped(ws, workspace):
    (workspace / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    with pytest.raises(ToolError, match="binary"):
        files.read_file(ws, {"path": "blob.bin"}, 10_000)


def test_symlink_inside_the_workspace_is_followed_but_not_written_through(ws, workspace):
    (workspace / "real.txt").write_text("hello\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    assert files.read_file(ws, {"path": "alias.txt"}, 1000).output == "hello\n"
    with pytest.raises(FileRefused, match="symbolic link"):
        files.write_file(ws, {"path": "alias.txt", "content": "x"}, 1000)


def test_write_replaces_atomically_and_keeps_the_mode(ws, workspace):
    script = workspace / "run.sh"
    script.write_text("old")
    script.chmod(0o755)
    files.write_file(ws, {"path": "run.sh", "content": "new"}, 1000)
    assert script.read_text() == "new" and script.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in workspace.iterdir()] == ["run.sh"]


def test_written_files_belong_to_the_owner(workspace):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    ws = Workspace(workspace, (65534, 65534))
    files.write_file(ws, {"path": "deep/er/f.txt", "content": "x"}, 1000)
    for path in ["deep", "deep/er", "deep/er/f.txt"]:
        assert (workspace / path).stat().st_uid == 65534, path


def test_sandbox_absolute_paths_are_accepted(ws, workspace):
    files.write_file(ws, {"path": "/workspace/a/b.txt", "content": "ok"}, 1000)
    assert (workspace / "a/b.txt").read_text() == "ok"
    assert files.read_file(ws, {"path": str(workspace / "a/b.txt")}, 1000).output == "ok"


def test_list_dir_depth_ignore_and_cap(ws, workspace):
    for name in ["a/x.txt", "a/b/y.txt", ".git/config", "node_modules/m.js"]:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("z")
    shallow = files.list_dir(ws, {}, 100).output.splitlines()
    assert shallow == ["a/"]
    deep = files.list_dir(ws, {"depth": 3, "ignore": []}, 100).output
    assert "a/b/y.txt (1 bytes)" in deep and ".git/config (1 bytes)" in deep
    capped = files.list_dir(ws, {"depth": 3, "ignore": []}, 2)
    assert capped.truncated and "stopped after 2 entries" in capped.output


def test_fallback_walk_refuses_every_symlink_and_dotdot(workspace):
    (workspace / "d").mkdir()
    (workspace / "d/f").write_text("x")
    (workspace / "ln").symlink_to("d")
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = safe_files._walk_nofollow(root, "d/f", os.O_RDONLY, 0)
        assert os.read(fd, 10) == b"x"
        os.close(fd)
        for path in ["ln/f", "d/../d/f"]:
            with pytest.raises(OSError):
                safe_files._walk_nofollow(root, path, os.O_RDONLY, 0)
    finally:
        os.close(root)


def test_openat2_is_available_here():
    # If this fails, the file tools silently use the stricter fallback: say so in the README.
    assert safe_files.HAVE_OPENAT2


def test_spreadsheet_xlsx_and_csv(ws, workspace):
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    sheet.append(["month", "amount"])
    for month, amount in [("Jan", 10), ("Feb", 12.5), ("Mar", None)]:
        sheet.append([month, amount])
    book.create_sheet("Empty")
    book.save(workspace / "sales.xlsx")
    out = spreadsheet.read_spreadsheet(ws, {"path": "sales.xlsx", "max_rows": 2}, 10**6)
    assert "sheets: Sales, Empty" in out.output and "header: month | amount" in out.output
    assert "1: Jan | 10" in out.output and "2: Feb | 12.5" in out.output
    assert "start_row=3" in out.output and out.data["total_rows"] == 3
    (workspace / "t.csv").write_text("name,qty\n苹果,3\npear,4\n", encoding="utf-8")
    csv_out = spreadsheet.read_spreadsheet(ws, {"path": "t.csv", "start_row": 2}, 10**6)
    assert "2: pear | 4" in csv_out.output and "苹果" not in csv_out.output
    with pytest.raises(ToolError, match="no sheet"):
        spreadsheet.read_spreadsheet(ws, {"path": "sales.xlsx", "sheet": "Nope"}, 10**6)
    (workspace / "bad.xlsx").write_bytes(b"not a zip")
    with pytest.raises(ToolError, match="cannot read as xlsx"):
        spreadsheet.read_spreadsheet(ws, {"path": "bad.xlsx"}, 10**6)
