"""MkDocs hook: execute the documentation's notebooks at every build and render them as pages.

Each ``docs/*.ipynb`` listed in NOTEBOOKS is run top to bottom by nbclient (a fresh Python kernel, ipykernel) and
becomes the page ``<name>.md``: markdown cells as they are, code cells as Python blocks, their outputs (text, and
PNG figures embedded as data URIs) after them.  A cell that raises fails the build (nbclient's CellExecutionError
is not caught), so the tutorial can never go stale.  The site's .ipynb for download is the executed one, with its
outputs (the repository stores it without them).

Lighter than mkdocs-jupyter or nbconvert: nbclient + ipykernel are the only additions (the ``docs`` extra).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from mkdocs.structure.files import File

NOTEBOOKS = ("tutorial.ipynb",)
TIMEOUT = 600  # seconds per cell


def _text(output: dict) -> str | None:
    kind = output.get("output_type")
    if kind == "stream":
        return "".join(output.get("text", ""))
    if kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        if "image/png" in data:
            return None
        return "".join(data.get("text/plain", ""))
    return None


def _render(nb) -> str:  # noqa: ANN001 - an nbformat NotebookNode
    parts: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        elif cell.cell_type == "code":
            parts.append(f"```python\n{cell.source}\n```")
            for out in cell.get("outputs", []):
                data = out.get("data", {}) if out.get("output_type") in ("execute_result", "display_data") else {}
                if "image/png" in data:
                    png = "".join(data["image/png"]).replace("\n", "")
                    parts.append(f'<img alt="figure" src="data:image/png;base64,{png}">')
                    continue
                text = _text(out)
                if text and text.strip():
                    parts.append("```text\n" + text.rstrip("\n") + "\n```")
    return "\n\n".join(parts) + "\n"


def execute(path: Path):  # noqa: ANN201 - an nbformat NotebookNode
    """The notebook at `path`, executed in its own directory's parent (the repository root)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_src = str(Path(__file__).resolve().parent.parent / "src")
    # The kernel imports attnphase from this checkout even where it is not installed (PYTHONPATH=src builds).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (env_src, os.environ.get("PYTHONPATH")) if p)
    # The same page on every build: no "compiling ... (first use)" notice where the kernels were not cached yet.
    os.environ["ATTNPHASE_QUIET"] = "1"
    from jupyter_client import KernelManager

    # IPC, not TCP: a local kernel, and no "running over TCP without encryption" warning in the build's output.
    # The IPC sockets live in a temporary directory, not in the working directory.
    with tempfile.TemporaryDirectory(prefix="attnphase-docs-kernel-") as tmp:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(tmp, "kernel"))
        client = NotebookClient(nb, km=km, timeout=TIMEOUT, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent.parent)}})
        client.execute()
    return nb


def on_files(files, config):  # noqa: ANN001, ANN201 - mkdocs' hook signature
    import logging

    log = logging.getLogger("mkdocs.hooks.notebooks")
    for name in NOTEBOOKS:
        path = Path(config["docs_dir"]) / name
        t0 = time.perf_counter()
        nb = execute(path)
        log.info("executed %s in %.0f s", name, time.perf_counter() - t0)
        page = name.removesuffix(".ipynb") + ".md"
        files.append(File.generated(config, page, content=_render(nb)))
        # The download is the executed notebook too (the repository keeps it without outputs).
        stored = files.get_file_from_path(name)
        if stored is not None:
            files.remove(stored)
        import nbformat

        files.append(File.generated(config, name, content=nbformat.writes(nb)))
    return files
