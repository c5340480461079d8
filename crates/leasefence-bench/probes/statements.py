"""Used by the pg-*.sh probes, run as `python3 -B - LIB WORK HERE`: the library's own SQL
statements as pgbench lines, and the scratch folder `work` the probe's scripts go to."""

import sys

lib, work = sys.argv[1:3]


def stmt(name):
    """`lib`/sql/`name`.sql without its comment lines, on one line."""
    text = open(f"{lib}/sql/{name}.sql").read()
    return " ".join(" ".join(l for l in text.splitlines() if not l.startswith("--")).split())
