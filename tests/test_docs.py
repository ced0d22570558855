"""The documentation travels with the code: every page in the site's navigation exists, the pages the issue
asks for are there, and neither the README, the docs nor the CLI-facing modules send the reader outside the
repository.  (The site itself is built with warnings as errors by `make docs`, in CI.)"""

from __future__ import annotations

import importlib.util
import re

from conftest import TESTS_DIR

ROOT = TESTS_DIR.parent
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("notebooks_hook", ROOT / "docs_hooks" / "notebooks.py")
notebooks_hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebooks_hook)


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("nav:"):text.index("plugins:")]
    return re.findall(r":\s*(\S+\.md)\s*$", nav, flags=re.MULTILINE)


def test_every_nav_page_exists_and_every_page_is_in_the_nav():
    pages = _nav_pages()
    assert pages, "mkdocs.yml has no nav"
    # A page is a markdown file, or a notebook the build executes and renders (docs_hooks/notebooks.py).
    NOTEBOOKS = notebooks_hook.NOTEBOOKS

    rendered = {n.removesuffix(".ipynb") + ".md" for n in NOTEBOOKS}
    for page in pages:
        assert (DOCS / page).is_file() or (page in rendered and (DOCS / page.replace(".md", ".ipynb")).is_file()), page
    assert sorted([p.name for p in DOCS.glob("*.md")] + sorted(rendered)) == sorted(pages)


def test_the_tutorial_notebook_is_executed_by_the_build_and_linked():
    # issue 20: a notebook researchers can start from, run by `make docs` so that it never goes stale
    import json

    assert "docs_hooks/notebooks.py" in (ROOT / "mkdocs.yml").read_text()
    nb = json.loads((DOCS / "tutorial.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for needed in ("solve(", "solve_curve(", "transition(", "simulate(", '"fast"'):
        assert needed in code, needed
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # stored without outputs
    index = (DOCS / "index.md").read_text()
    for page in ("tutorial.md", "untied.md", "basins.md", "rank2.md"):
        assert f"]({page})" in index, page


def test_the_pages_cover_the_issue():
    text = {p.name: p.read_text() for p in DOCS.glob("*.md")}
    assert "Cui" in text["cite.md"] and "2402.03902" in text["cite.md"] and "NeurIPS 2024" in text["cite.md"]
    assert "0.548" in text["transition.md"] and "pitchfork" in text["transition.md"] and "fold" in text["transition.md"]
    assert "standard error" in text["numerics.md"] and "scrambl" in text["numerics.md"]
    for name in ("alpha", "omega", "q", "m", "theta", "train_loss", "test_error", "test_error_linear"):
        assert f"`{name}`" in text["quantities.md"], name
    assert "attnphase[experiments]" in text["install.md"]
    assert "::: attnphase" in text["api.md"]  # generated from the docstrings


def test_no_reference_outside_the_repository():
    files = [ROOT / "README.md", ROOT / "mkdocs.yml", *DOCS.glob("*.md"),
             *(ROOT / "src" / "attnphase" / "cli").glob("*.py"), *(ROOT / "src" / "attnphase" / "reproduce").glob("*.py"),
             *(ROOT / "src" / "attnphase").rglob("*.py")]
    for f in files:
        text = f.read_text()
        assert "../shared" not in text and "MODEL.md" not in text, f
    assert "docs/" in (ROOT / "README.md").read_text()


def _dotted_names() -> dict[str, set[str]]:
    """Every dotted `attnphase.` name in the README, the pages and the tutorial notebook, with where it is."""
    import json

    texts = {p.name: p.read_text() for p in [ROOT / "README.md", *DOCS.glob("*.md")]}
    nb = json.loads((DOCS / "tutorial.ipynb").read_text())
    texts["tutorial.ipynb"] = "\n".join("".join(c["source"]) for c in nb["cells"])
    names: dict[str, set[str]] = {}
    for where, text in texts.items():
        for m in re.finditer(r"(?<![\w./-])attnphase(?:\.[A-Za-z_]\w*)+", text):
            names.setdefault(m.group(0), set()).add(where)
    return names


def _resolve(name: str) -> object:
    """Import the longest importable module prefix of `name`, then getattr the rest."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module exists but needs something missing: a real failure
                raise
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


def test_every_dotted_name_in_the_docs_exists():
    # issue 31: attnphase.plots_bayes, attnphase.theory.curves, attnphase.store.ResultStore were named but did not exist
    names = _dotted_names()
    assert len(names) > 20 and "attnphase.experiments.store" in names
    missing = {}
    for name, where in sorted(names.items()):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            missing[name] = (sorted(where), str(exc))
    assert not missing, missing


def test_the_index_links_every_page_of_the_nav():
    index = (DOCS / "index.md").read_text()
    for page in _nav_pages():
        if page != "index.md":
            assert f"]({page}" in index, page


def test_the_site_offers_the_executed_notebook_for_download(tmp_path, monkeypatch):
    # issue 31: the notebook is stored without outputs; the site's page and its .ipynb download carry them
    import json

    import nbformat
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import File, Files

    def executed(path):  # noqa: ANN001, ANN202 - stands in for nbclient (seconds of kernel start-up)
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="an output\n")]
        return nb

    monkeypatch.setattr(notebooks_hook, "execute", executed)
    config = MkDocsConfig()
    config.load_dict({"site_name": "t", "docs_dir": str(DOCS), "site_dir": str(tmp_path)})
    config.validate()
    monkeypatch.setattr(config.plugins, "_current_plugin", None, raising=False)  # set by mkdocs' event dispatch
    files = Files([File(name, str(DOCS), str(tmp_path), False) for name in notebooks_hook.NOTEBOOKS])
    out = notebooks_hook.on_files(files, config)
    for name in notebooks_hook.NOTEBOOKS:
        download = out.get_file_from_path(name)
        nb = json.loads(download.content_string)
        assert all(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), name
        page = out.get_file_from_path(name.removesuffix(".ipynb") + ".md")
        assert "an output" in page.content_string
