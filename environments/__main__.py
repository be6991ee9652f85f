"""`python -m environments validate ENV` — validate without Pulumi and print a summary."""

from __future__ import annotations

import argparse
import sys

from .findings import Level
from .loader import declared_environments, validate_environment
from .summary import render_summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m environments")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="validate an environment (name or path) and print its summary")
    v.add_argument("env", nargs="?", help="environment name (environments/<name>.yaml) or path; default: all")
    args = ap.parse_args(argv)
    names = [args.env] if args.env else declared_environments()
    rc = 0
    for name in names:
        env, found = validate_environment(name)
        for f in found:
            print(f.render(), file=sys.stderr if f.level is Level.ERROR else sys.stdout)
        if env is None:
            errors = sum(f.level is Level.ERROR for f in found)
            print(f"{name}: INVALID — {errors} error(s); nothing was run.", file=sys.stderr)
            rc = 1
        else:
            print(render_summary(env))
    return rc


if __name__ == "__main__":
    sys.exit(main())
