"""A plugin distribution whose module raises on import, installed as its metadata on PYTHONPATH (the plugin tests)."""

from pathlib import Path


def install_broken_plugin(site: Path) -> Path:
    """Write `brokenplug` (a `fdabench.methods` entry point whose module raises on import) under `site`; returns
    `site`, the folder to put on PYTHONPATH."""
    (site / "brokenplug").mkdir(parents=True)
    (site / "brokenplug/__init__.py").write_text("raise RuntimeError('broken on import')\n")
    info = site / "brokenplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fdabench.methods]\nbrokenplug = brokenplug:Method\n")
    return site
