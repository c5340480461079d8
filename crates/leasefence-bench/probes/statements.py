"""Used by the pg-*.sh probes: the library's own SQL statements as pgbench lines."""


def stmt(lib, name):
    """`lib`/sql/`name`.sql without its comment lines, on one line."""
    text = open(f"{lib}/sql/{name}.sql").read()
    return " ".join(" ".join(l for l in text.splitlines() if not l.startswith("--")).split())
