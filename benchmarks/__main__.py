"""``python -m benchmarks --scale 1``: generate a synthetic anthology, measure, write RESULTS.md."""

from __future__ import annotations

import argparse

from benchmarks.run import main


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="1 = the real anthology (449 practices); 10, 100")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median reported)")
    parser.add_argument(
        "--budget",
        type=float,
        default=20.0,
        help="stop repeating a measurement once it has used this many seconds",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="kill a single run after this many seconds")
    parser.add_argument("--no-pyshacl", action="store_true", help="skip the pySHACL baseline (slow at scale)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    main(args.scale, args.seed, args.runs, args.budget, args.timeout, not args.no_pyshacl, not args.no_write)


if __name__ == "__main__":
    cli()
