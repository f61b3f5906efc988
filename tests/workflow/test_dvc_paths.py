"""Every source path dvc.yaml names as a dependency exists: a dependency on a moved or removed folder makes
`dvc repro` fail, or hides a change from it, and nothing else would say so before a user runs it."""

import yaml


def _source_dependencies(dvc_yaml: dict) -> list[str]:
    """Dependencies that name the project's own files (not data, results or `${...}` templates)."""
    paths = []
    for stage in dvc_yaml["stages"].values():
        body = stage.get("do", stage)
        paths += [d for d in body.get("deps", []) if "${" not in d and not d.startswith(("data/", "results/"))]
    return paths


def test_every_source_dependency_of_dvc_yaml_exists(repo_root):
    dependencies = _source_dependencies(yaml.safe_load((repo_root / "dvc.yaml").read_text()))
    assert dependencies, "dvc.yaml names no source dependency: the reader above no longer understands it"
    missing = [path for path in dependencies if not (repo_root / path).exists()]
    assert not missing, f"dvc.yaml depends on paths that do not exist: {missing}"
