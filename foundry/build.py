"""Build the Foundry module as Foundry users install it: the module folder,
a versioned zip with module.json at its root, and module.json beside it.

    python3 foundry/build.py --version 0.2.0 --repo https://github.com/OWNER/vtt-sync
    python3 foundry/build.py --version 0.2.0 --base-url https://your.host/vtt-sync/
    python3 foundry/build.py                       # a folder to copy into Data/modules/

writes foundry/dist/vtt-sync/ (the module folder), foundry/dist/vtt-sync-<version>.zip
and foundry/dist/module.json.

The manifest's `manifest` and `download` are what a release fills in, as
well-kept modules do (socketlib; foundry-rest-api's release build): with
`--repo`, `download` is this version's zip attached to the repository's
release `v<version>` and `manifest` is `releases/latest/download/module.json`,
the newest release's manifest, so Foundry finds updates at one URL; `readme`
and `changelog` point at that release's files. With `--base-url`, both are
files served from that address. Without either, the manifest has no
`manifest` nor `download` (a folder copied by hand updates by hand).

The module's client is the project's own client_stub/web/vtt-sync-client.js,
copied byte for byte into scripts/ (one source, never forked). The zip is
reproducible (fixed timestamps, sorted entries).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLIENT = REPO / "client_stub" / "web" / "vtt-sync-client.js"
MODULE_ID = "vtt-sync"
# What the module folder holds (besides the copied client and the manifest).
PARTS = ("scripts", "styles", "lang")
SOURCE_SUFFIXES = {".mjs", ".js", ".css", ".json"}
# Files a Foundry user reads beside the code (the manifest's readme and changelog).
DOCS = (HERE / "README.md", HERE / "CHANGELOG.md", REPO / "LICENSE")
ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # a fixed date: the same sources give the same zip
# Foundry compares versions as dotted numbers (foundry.utils.isNewerVersion):
# MAJOR.MINOR.PATCH, with an optional -suffix for a pre-release.
VERSION = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$")
# A GitHub repository's address: its releases are where Foundry downloads from.
GITHUB_REPO = re.compile(r"^https://github\.com/[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")


class BuildError(ValueError):
    """A version or an address a release cannot be made with."""


def zip_name(version: str) -> str:
    return f"{MODULE_ID}-{version}.zip"


def release_urls(version: str, repo: str | None, base_url: str | None) -> dict[str, str]:
    """The manifest fields a release fills: where Foundry finds this version
    and its updates, and the pages a user reads."""
    if repo and base_url:
        raise BuildError("give --repo or --base-url, not both")
    if repo:
        repo = repo.rstrip("/").removesuffix(".git")
        if not GITHUB_REPO.match(repo):
            raise BuildError(f"--repo must be https://github.com/OWNER/NAME, not {repo!r}")
        tag = f"v{version}"
        return {
            "url": repo,
            "manifest": f"{repo}/releases/latest/download/module.json",
            "download": f"{repo}/releases/download/{tag}/{zip_name(version)}",
            "readme": f"{repo}/blob/{tag}/foundry/README.md",
            "changelog": f"{repo}/blob/{tag}/foundry/CHANGELOG.md",
            "bugs": f"{repo}/issues",
            "license": f"{repo}/blob/{tag}/LICENSE",
        }
    if base_url:
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise BuildError(f"--base-url must be an http(s) address, not {base_url!r}")
        base = base_url if base_url.endswith("/") else base_url + "/"
        return {
            "manifest": base + "module.json",
            "download": base + zip_name(version),
            "readme": base + "README.md",
            "changelog": base + "CHANGELOG.md",
        }
    return {}


def manifest(
    version: str | None = None, repo: str | None = None, base_url: str | None = None
) -> dict[str, Any]:
    """The source module.json with this release's version and addresses."""
    data: dict[str, Any] = json.loads((HERE / "module.json").read_text(encoding="utf-8"))
    version = version or data["version"]
    if not VERSION.match(version):
        raise BuildError(f"the version must be MAJOR.MINOR.PATCH (e.g. 0.2.0), not {version!r}")
    data["version"] = version
    data.update(release_urls(version, repo, base_url))
    return data


def build(
    out: Path, version: str | None = None, repo: str | None = None, base_url: str | None = None
) -> Path:
    """Write the module folder, its zip and module.json under `out`; return the zip."""
    data = manifest(version, repo, base_url)
    folder = out / MODULE_ID
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for part in PARTS:
        for src in sorted((HERE / part).rglob("*")):
            if src.is_file() and src.suffix in SOURCE_SUFFIXES:
                dst = folder / src.relative_to(HERE)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
    shutil.copyfile(CLIENT, folder / "scripts" / "vtt-sync-client.js")
    for doc in DOCS:
        shutil.copyfile(doc, folder / doc.name)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    (folder / "module.json").write_text(text, encoding="utf-8")
    (out / "module.json").write_text(text, encoding="utf-8")
    archive = out / zip_name(data["version"])
    for old in out.glob(f"{MODULE_ID}-*.zip"):
        old.unlink()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, path.read_bytes())
    return archive


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--out", type=Path, default=HERE / "dist", help="output folder (default foundry/dist)"
    )
    p.add_argument(
        "--version", help="the release's version, MAJOR.MINOR.PATCH (default: module.json's)"
    )
    p.add_argument(
        "--repo", help="the GitHub repository whose releases carry the zip and module.json"
    )
    p.add_argument("--base-url", help="or: where module.json and the zip will be served from")
    args = p.parse_args(argv)
    try:
        archive = build(args.out, args.version, args.repo, args.base_url)
    except BuildError as err:
        p.error(str(err))
    print(f"built {args.out / MODULE_ID}, {archive} and {args.out / 'module.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
