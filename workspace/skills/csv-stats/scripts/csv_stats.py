"""Prints row/column counts and per-column stats of a CSV file (stdlib only)."""

import argparse
import csv
import sys


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", "")) if text.strip() else None
    except ValueError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--delimiter", default="")
    args = parser.parse_args()
    with open(args.path, newline="", encoding="utf-8-sig") as handle:
        sample = handle.read(65536)
        handle.seek(0)
        delimiter = args.delimiter or csv.Sniffer().sniff(sample, ",;\t|").delimiter
        rows = list(csv.reader(handle, delimiter=delimiter))
    if not rows:
        print("empty file")
        return 1
    header, body = rows[0], rows[1:]
    print(f"rows: {len(body)}  columns: {len(header)}  delimiter: {delimiter!r}")
    for index, name in enumerate(header):
        cells = [row[index] if index < len(row) else "" for row in body]
        empty = sum(1 for c in cells if not c.strip())
        values = [v for v in map(number, cells) if v is not None]
        line = f"- {name}: empty {empty}"
        if values and len(values) >= (len(cells) - empty) * 0.9:
            mean = sum(values) / len(values)
            line += f", numeric min {min(values):g} max {max(values):g} mean {mean:.4g}"
        else:
            line += f", distinct {len(set(cells))}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
