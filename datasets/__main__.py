"""``python -m dpmmbench.datasets``: fetch raw data and write preprocessed datasets (the workflow's
fetch and preprocess rules call these).

    python -m dpmmbench.datasets fetch fashion-mnist --manifest data/raw/manifests/fashion-mnist.sha256
    python -m dpmmbench.datasets preprocess "fashion-mnist?n=12000" --out data/processed/fashion-12k.npz

The data folder is ``$DPMMBENCH_DATA`` (default ``data/raw``). A source that cannot be
reached exits with status 1 and a message saying what to download and where to put it.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import load
from .fetch import DataUnavailable, write_manifest
from .registry import resolve
from .store import save


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m dpmmbench.datasets", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("fetch", help="download and verify the raw files of a dataset")
    get.add_argument("name", help="dataset name (parameters are ignored: the raw files are the same)")
    get.add_argument("--manifest", type=Path, help="write 'sha256  file' lines of the verified files here")
    prep = sub.add_parser("preprocess", help="load a dataset and store it as .npz (loads without pickle)")
    prep.add_argument("name", help='dataset name with parameters, e.g. "fashion-mnist?n=12000"')
    prep.add_argument("--out", type=Path, required=True, help="destination .npz")
    args = parser.parse_args(argv)
    try:
        builder, _, canonical = resolve(args.name)
        if args.command == "fetch":
            files = builder.fetch() if builder.fetch is not None else []
            if args.manifest is not None:
                write_manifest(files, args.manifest)
            print("\n".join(str(f) for f in files) or f"{builder.name}: nothing to fetch (generated or bundled)")
        else:
            start = time.perf_counter()
            ds = load(args.name)
            save(ds, args.out)
            print(f"{args.out}: {canonical}, {ds.X.shape[0]} x {ds.X.shape[1]}, "
                  f"{time.perf_counter() - start:.1f} s")
    except (DataUnavailable, ValueError, OSError) as exc:
        print(f"python -m dpmmbench.datasets {args.command} {args.name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
