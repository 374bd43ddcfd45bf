"""Build the Foundry module: foundry/dist/vtt-sync/ (the module folder) and
foundry/dist/vtt-sync.zip (what Foundry installs from a manifest URL), with
foundry/dist/module.json beside the zip for hosting.

The module's client is the project's own client_stub/web/vtt-sync-client.js,
copied byte for byte into scripts/ (one source, never forked); the module's
scripts import it as ./vtt-sync-client.js.

    python3 foundry/build.py [--out DIR] [--base-url https://host/path/] [--version X.Y.Z]

`--base-url` is where module.json and vtt-sync.zip will be served from: the
manifest's `manifest` and `download` URLs point there. The zip is
reproducible (fixed timestamps, sorted entries).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLIENT = REPO / "client_stub" / "web" / "vtt-sync-client.js"
MODULE_ID = "vtt-sync"
# What the module folder holds (besides the copied client).
PARTS = ("scripts", "styles", "lang")
SOURCE_SUFFIXES = {".mjs", ".js", ".css", ".json"}
ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # a fixed date: the same sources give the same zip


def manifest(base_url: str | None, version: str | None) -> dict:
    data = json.loads((HERE / "module.json").read_text(encoding="utf-8"))
    if version:
        data["version"] = version
    if base_url:
        base = base_url if base_url.endswith("/") else base_url + "/"
        data["manifest"] = base + "module.json"
        data["download"] = base + f"{MODULE_ID}.zip"
    return data


def build(out: Path, base_url: str | None = None, version: str | None = None) -> Path:
    """Write the module folder and the zip under `out`; return the folder."""
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
    data = manifest(base_url, version)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    (folder / "module.json").write_text(text, encoding="utf-8")
    (out / "module.json").write_text(text, encoding="utf-8")
    with zipfile.ZipFile(out / f"{MODULE_ID}.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, path.read_bytes())
    return folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--out", type=Path, default=HERE / "dist", help="output folder (default foundry/dist)"
    )
    p.add_argument("--base-url", help="where module.json and vtt-sync.zip will be served from")
    p.add_argument("--version", help="the module version to write in the manifest")
    args = p.parse_args(argv)
    folder = build(args.out, args.base_url, args.version)
    print(f"built {folder} and {args.out / (MODULE_ID + '.zip')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
