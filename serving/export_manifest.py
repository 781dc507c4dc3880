"""The export manifest: the size and SHA-256 of every file of a version, written last.

A version directory reaches a server by `cp -r`, `gsutil cp` or `rsync`, file by file and in no
set order, so a server polling the directory can see `saved_model.pb` and `variables/` while
`assets/labels.txt` is still arriving. `serving.exporter` therefore writes
`assets.extra/export_manifest.json` after every other file: each file's relative path, size and
SHA-256. A copy is complete when every file the manifest names is there at its size, whatever
order the copier chose (the manifest itself may arrive first), and it is intact when the checksums
match too. The embedded server loads a version only then (`serving.server.version_files`);
`tensorflow/serving` ignores the file (`assets.extra/` is for files the graph does not read).

Example:
    >>> write_manifest("/models/bert/3")                     # doctest: +SKIP
    >>> check_manifest("/models/bert/3").state               # doctest: +SKIP
    'complete'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from pipelines.atomic_writes import write_json

MANIFEST_FILE = os.path.join("assets.extra", "export_manifest.json")
FORMAT = "bert_keras.export_manifest/1"

ABSENT, WRITING, COMPLETE, DAMAGED = "absent", "writing", "complete", "damaged"


@dataclasses.dataclass(frozen=True)
class ManifestCheck:
    """What the manifest says of a version directory.

    Attributes:
        state: `"absent"` (no manifest: not one of this exporter's versions, or an older one),
            `"writing"` (the manifest or a file it names is missing or shorter than listed: a copy
            under way), `"complete"` (every file there at its size; with checksums verified:
            intact too), `"damaged"` (a file at its size with other bytes, or longer than listed).
        problem: the first file that makes it so, as `"assets/labels.txt: 7 of 23 bytes"`.
    """

    state: str
    problem: str = ""


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(version_dir: str) -> str:
    """Writes `<version_dir>/assets.extra/export_manifest.json` (atomically, last); returns its path."""
    files = {}
    for root, _, names in os.walk(version_dir):
        for name in names:
            full = os.path.join(root, name)
            relative = os.path.relpath(full, version_dir).replace(os.sep, "/")
            if relative == MANIFEST_FILE.replace(os.sep, "/"):
                continue
            files[relative] = {"size": os.path.getsize(full), "sha256": _sha256(full)}
    path = os.path.join(version_dir, MANIFEST_FILE)
    write_json(path, {"format": FORMAT, "files": dict(sorted(files.items()))}, indent=1)
    return path


def read_manifest(version_dir: str) -> dict | None:
    """{relative path: {"size", "sha256"}} of the manifest; None without one.

    Raises:
        ValueError: the manifest is there but not (yet) a whole manifest of this format.
    """
    path = os.path.join(version_dir, MANIFEST_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        content = json.loads(raw.decode("utf-8"))
        files = content["files"]
        if content.get("format") != FORMAT or not isinstance(files, dict):
            raise ValueError(f"format {content.get('format')!r}")
        for name, entry in files.items():
            if (not isinstance(name, str) or name.startswith("/") or ".." in name.split("/")
                    or not isinstance(entry.get("size"), int) or not isinstance(entry.get("sha256"), str)):
                raise ValueError(f"entry {name!r}")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{MANIFEST_FILE} is not a whole export manifest ({len(raw)} bytes): {exc}") from None
    return files


def check_manifest(version_dir: str, *, checksums: bool = False) -> ManifestCheck:
    """Whether the files of `version_dir` are those its manifest lists (see `ManifestCheck`).

    Sizes only by default (cheap enough for every poll); `checksums=True` reads every file too
    (once, before loading). Files the manifest does not name are ignored.
    """
    try:
        files = read_manifest(version_dir)
    except ValueError as exc:
        return ManifestCheck(WRITING, str(exc))
    if files is None:
        return ManifestCheck(ABSENT)
    for name, entry in files.items():
        full = os.path.join(version_dir, *name.split("/"))
        try:
            size = os.path.getsize(full)
        except OSError:
            return ManifestCheck(WRITING, f"{name}: not there yet")
        if size < entry["size"]:
            return ManifestCheck(WRITING, f"{name}: {size} of {entry['size']} bytes")
        if size > entry["size"]:
            return ManifestCheck(DAMAGED, f"{name}: {size} bytes, the manifest lists {entry['size']}")
    if checksums:
        for name, entry in files.items():
            try:
                digest = _sha256(os.path.join(version_dir, *name.split("/")))
            except OSError as exc:
                return ManifestCheck(WRITING, f"{name}: {exc.strerror or exc}")
            if digest != entry["sha256"]:
                return ManifestCheck(DAMAGED, f"{name}: its SHA-256 is not the manifest's (the file was "
                                              f"changed or damaged after the export)")
    return ManifestCheck(COMPLETE)


# What a SavedModel version directory holds besides the manifest (an export without one: older, or
# another exporter's).
SAVED_MODEL_ENTRIES = ("saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables", "assets", "assets.extra")


def unlisted_files(version_dir: str) -> list:
    """The files of `version_dir` that its export did not write (relative paths, sorted): those its
    manifest does not list, or, without a manifest, those outside a SavedModel's entries. Replacing
    the version would delete them.

    Raises:
        ValueError: the manifest is there but not a whole manifest (`read_manifest`).
    """
    listed = read_manifest(version_dir)
    found = []
    for root, _, names in os.walk(version_dir):
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), version_dir).replace(os.sep, "/")
            if listed is None:
                ours = relative.split("/")[0] in SAVED_MODEL_ENTRIES
            else:
                ours = relative in listed or relative == MANIFEST_FILE.replace(os.sep, "/")
            if not ours:
                found.append(relative)
    return sorted(found)
