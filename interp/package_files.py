"""Files shipped inside installed packages (corpora, real models), located without importing the package."""

from __future__ import annotations

import importlib.util
from pathlib import Path


class PackageFileMissing(FileNotFoundError):
    pass


def package_file(package: str, relative: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PackageFileMissing(f"package '{package}' is not installed: pip install {pip_name}")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.exists():
        raise PackageFileMissing(f"{path} is missing from the installed '{package}' package ({pip_name})")
    return path


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None
