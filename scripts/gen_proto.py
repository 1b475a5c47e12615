"""Generate Python gRPC stubs from proto/ into services/common/src (or --out DIR); --check diffs."""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
DEFAULT_OUT = ROOT / "services" / "common" / "src"
GENERATED_ROOT = "crayfish"


def generate(out: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for folder in [out / GENERATED_ROOT, *(out / GENERATED_ROOT).rglob("*")]:
        if folder.is_dir() and folder.name != "__pycache__":
            (folder / "__init__.py").touch()


def differences(left: Path, right: Path) -> list[str]:
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [f"only in {cmp.left}: {n}" for n in cmp.left_only]
    found += [f"only in {cmp.right}: {n}" for n in cmp.right_only]
    found += [f"differs: {left / n}" for n in cmp.diff_files]
    for sub in cmp.common_dirs:
        found += differences(left / sub, right / sub)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed stubs drifted")
    args = parser.parse_args()
    if not args.check:
        shutil.rmtree(DEFAULT_OUT / GENERATED_ROOT, ignore_errors=True)
        generate(DEFAULT_OUT)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        drift = differences(Path(tmp) / GENERATED_ROOT, DEFAULT_OUT / GENERATED_ROOT)
    for line in drift:
        print(line, file=sys.stderr)
    if drift:
        print("generated stubs drifted from proto/: run `make proto`", file=sys.stderr)
        return 1
    print("proto stubs up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
