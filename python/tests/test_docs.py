"""Every ```python block of docs/python.md and README.md runs, in order, against the installed
package (the blocks of one file share one namespace, as a reader's session would)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("doc", ["docs/python.md", "README.md", "python/README.md"])
def test_every_python_block_of_the_docs_runs(doc: str):
    text = (ROOT / doc).read_text()
    blocks = BLOCK.findall(text)
    if doc != "python/README.md":
        assert blocks, f"{doc} has no python block"
    namespace: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{doc} block {i + 1}", "exec"), namespace)
