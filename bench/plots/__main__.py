"""python3 -m bench.plots RESULTS_DIR [--out DIR]: the PNG figures of a run."""

import argparse
import sys
from pathlib import Path

from .figures import make_all


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m bench.plots", description=__doc__)
    parser.add_argument("results", help="a results folder (with results.json) or the file")
    parser.add_argument("--out", help="where the PNGs go (default RESULTS/plots)")
    args = parser.parse_args(argv)
    results = Path(args.results)
    out = Path(args.out) if args.out else (results if results.is_dir() else results.parent) / "plots"
    for path in make_all(results, out):
        print(path)
    return 0


sys.exit(main())
