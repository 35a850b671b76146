"""Reading a bundle's files from a directory or a zip, never writing any of them to disk.

A zip comes from someone the auditor does not trust: entries with paths, duplicates, links or
sizes past the limits are refused before anything is decompressed.
"""

import zipfile
from pathlib import Path

BUNDLE_FILES = ("manifest.json", "receipts.jsonl", "events.jsonl", "checkpoints.jsonl", "approvals.jsonl",
                "policies.jsonl", "runs.jsonl", "keys.json", "summary.html")
MAX_FILE_BYTES = 2 * 1024**3
MAX_TOTAL_BYTES = 8 * 1024**3
MAX_ENTRIES = 64
_READ = 1024 * 1024


class BundleError(Exception):
    """The bundle cannot be read at all (not a directory or zip, unsafe zip)."""


def read_bundle(path) -> dict[str, bytes]:
    """File name -> bytes for every file at the bundle's root."""
    path = Path(path)
    if path.is_dir():
        return _read_directory(path)
    if path.is_file() and zipfile.is_zipfile(path):
        return _read_zip(path)
    raise BundleError(f"{path} is neither a bundle directory nor a zip file")


def _read_directory(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for entry in sorted(path.iterdir()):
        if entry.is_symlink():
            raise BundleError(f"{entry.name} is a symbolic link; a bundle holds plain files only")
        if entry.is_dir():
            raise BundleError(f"{entry.name} is a directory; a bundle holds plain files at its root only")
        size = entry.stat().st_size
        total += size
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            raise BundleError(f"{entry.name}: {size} bytes is past the verifier's size limit")
        files[entry.name] = entry.read_bytes()
    return files


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..") and ":" not in name \
        and not name.startswith(".")


def _read_zip(path: Path) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleError(f"{path.name}: not a readable zip ({exc})") from exc
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ENTRIES:
            raise BundleError(f"{len(infos)} entries; a bundle has {len(BUNDLE_FILES)} files")
        seen: set[str] = set()
        total = 0
        for info in infos:
            if not _safe_name(info.filename) or info.is_dir():
                raise BundleError(f"entry {info.filename!r} is not a plain file at the zip's root (path traversal?)")
            if info.filename in seen:
                raise BundleError(f"entry {info.filename!r} appears twice; which one counts would be ambiguous")
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise BundleError(f"entry {info.filename!r} is a symbolic link")
            seen.add(info.filename)
            total += info.file_size
            if info.file_size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
                raise BundleError(f"entry {info.filename!r} declares {info.file_size} bytes, past the size limit")
        files: dict[str, bytes] = {}
        for info in infos:
            files[info.filename] = _read_entry(archive, info)
        return files


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    # The declared size is the attacker's word: stop at it rather than trust it (a zip bomb lies).
    parts, size = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_READ):
                size += len(chunk)
                if size > info.file_size:
                    raise BundleError(f"entry {info.filename!r} inflates past its declared size")
                parts.append(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise BundleError(f"entry {info.filename!r} cannot be read ({exc})") from exc
    return b"".join(parts)
