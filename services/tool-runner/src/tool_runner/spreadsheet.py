"""read_spreadsheet: rows of an xlsx sheet or a csv file as a text table."""

from __future__ import annotations

import csv
import io
import warnings
from typing import Any

from crayfish_common.tools import ToolError, ToolResult, object_schema

from tool_runner.files import PATH_ARG, FileTool, decode_text
from tool_runner.workspace import Workspace


class ReadSpreadsheet(FileTool):
    name = "read_spreadsheet"
    description = "Read rows of an .xlsx sheet or a .csv file in the workspace as a table."
    parameters = object_schema(
        {
            "path": PATH_ARG,
            "sheet": {"type": "string"},
            "header": {"type": "boolean", "description": "First row is a header (default)."},
            "start_row": {"type": "integer", "minimum": 1},
            "max_rows": {"type": "integer", "minimum": 1, "maximum": 5000},
        },
        required=["path"],
    )

    def work(self, args: dict[str, Any]) -> ToolResult:
        return read_spreadsheet(self.ws, args, self.cap)


def read_spreadsheet(ws: Workspace, args: dict[str, Any], max_bytes: int) -> ToolResult:
    path = args["path"]
    start = int(args.get("start_row", 1))
    limit = int(args.get("max_rows", 100))
    data = ws.read_bytes(path, max_bytes)
    lower = path.lower()
    if lower.endswith((".csv", ".tsv")):
        sheets, name, rows = ["(csv)"], "(csv)", _csv_rows(path, data, lower.endswith(".tsv"))
    elif lower.endswith((".xlsx", ".xlsm")):
        sheets, name, rows = _xlsx_rows(path, data, args.get("sheet"))
    else:
        raise ToolError(f"{path}: not a spreadsheet (.xlsx, .xlsm, .csv or .tsv)")
    header = rows[0] if rows and args.get("header", True) else None
    body = rows[1:] if header is not None else rows
    chosen = body[start - 1 : start - 1 + limit]
    lines = [f"sheets: {', '.join(sheets)}", f"sheet: {name}; {len(body)} data rows"]
    if header is not None:
        lines.append("header: " + " | ".join(header))
    for number, row in enumerate(chosen, start=start):
        lines.append(f"{number}: " + " | ".join(row))
    last = start - 1 + len(chosen)
    if last < len(body):
        lines.append(f"[rows {start}-{last} of {len(body)}; use start_row={last + 1} for more]")
    result = {
        "sheets": sheets,
        "sheet": name,
        "header": header,
        "rows": chosen,
        "total_rows": len(body),
    }
    return ToolResult(ok=True, output="\n".join(lines), data=result)


def _csv_rows(path: str, data: bytes, tabs: bool) -> list[list[str]]:
    text = decode_text(path, data.removeprefix(b"\xef\xbb\xbf"))
    return [row for row in csv.reader(io.StringIO(text), delimiter="\t" if tabs else ",")]


def _xlsx_rows(path: str, data: bytes, sheet: str | None) -> tuple[list[str], str, list[list[str]]]:
    import openpyxl  # imported here: only this tool needs it

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise ToolError(f"{path}: cannot read as xlsx ({type(exc).__name__}: {exc})") from exc
    try:
        names = list(book.sheetnames)
        chosen = sheet or names[0]
        if chosen not in names:
            raise ToolError(f"{path}: no sheet {chosen!r} (sheets: {', '.join(names)})")
        rows = [
            ["" if v is None else str(v) for v in row]
            for row in book[chosen].iter_rows(values_only=True)
        ]
    finally:
        book.close()
    return names, chosen, rows
