"""The console's static files: what is loaded, and that symlinks never are."""

from __future__ import annotations

from pathlib import Path

from adapter.http.console import CSP, STATIC_DIR, load_static

BUDGET_BYTES = 64 * 1024


def test_shipped_files_are_loaded_and_small() -> None:
    served = load_static()
    assert {"index.html", "style.css", "js/app.js", "js/sse.js"} <= served.keys()
    assert all(name.endswith((".html", ".js", ".css", ".svg")) for name in served)
    assert sum(len(f.body) for f in served.values()) <= BUDGET_BYTES
    assert served["js/app.js"].content_type == "text/javascript; charset=utf-8"
    assert STATIC_DIR.is_dir()


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.html"
    secret.write_text("do not serve")
    served_dir = tmp_path / "static"
    (served_dir / "js").mkdir(parents=True)
    (served_dir / "index.html").write_text("<!doctype html>")
    (served_dir / "leak.html").symlink_to(secret)
    (served_dir / "linked").symlink_to(tmp_path, target_is_directory=True)
    (served_dir / "js" / "app.js").write_text("export {};")
    (served_dir / "notes.txt").write_text("not a console file type")
    assert sorted(load_static(served_dir)) == ["index.html", "js/app.js"]


def test_csp_allows_only_the_console_itself() -> None:
    assert CSP.startswith("default-src 'self';")
    assert "unsafe" not in CSP
