"""Image and model files: where they are, what they are, and their digests.

Every path an image set names is resolved under its root and must stay there;
an image is read when a request is sent, and checked against the digest it was
landed with.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from ableaudit.records import ImageRef


class ImageSetError(ValueError):
    """An image set cannot be loaded or landed as given; the message lists every problem and the fix."""


def resolve_under(root: str | Path, path: str | Path) -> tuple[Path, str]:
    """The real file ``path`` names under ``root``, and its POSIX path relative to the root.

    ``path`` may be relative to the root or absolute; after resolving ``..``
    and symbolic links it must lie inside the (resolved) root, else
    ImageSetError: an image set must not read files elsewhere on the machine.
    """
    try:
        base = Path(root).expanduser().resolve()
        p = Path(path).expanduser()
        full = (p if p.is_absolute() else base / p).resolve()
    except (OSError, RuntimeError, ValueError) as err:  # a link loop, a name too long
        raise ImageSetError(
            f"image path {str(path)!r} cannot be resolved ({err}); name a plain file "
            "inside image_root"
        ) from None
    try:
        rel = full.relative_to(base)
    except ValueError:
        raise ImageSetError(
            f"image path {str(path)!r} escapes the image root {base}; "
            "keep every image inside image_root (no '..', no links out of it)"
        ) from None
    if not rel.parts:
        raise ImageSetError(f"image path {str(path)!r} is the image root itself, not a file")
    return full, rel.as_posix()


MAX_IMAGE_BYTES = 50 * 1024 * 1024
"""The largest image file read, in bytes (50 MiB, far past any photo a vision model takes):
checked with stat() before the file is read, so a multi-gigabyte file is never read whole."""

MAX_IMAGE_BYTES_ENV = "ABLEAUDIT_MAX_IMAGE_BYTES"
"""The environment variable that raises (or lowers) MAX_IMAGE_BYTES for every read: imports
without --max-image-bytes, and the images a vision audit loads and sends."""


PAIRS_CATEGORIES = ("occupations", "status", "potential_crime")
"""The category folders of a PAIRS tree."""


def find_pairs_root(root: str | Path) -> Path:
    """The folder holding the PAIRS category folders: ``root`` itself, or ``root/data`` (the repository layout)."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise ImageSetError(
            f"PAIRS root {str(root)!r} is not a folder; point image_root at the folder holding "
            f"{', '.join(PAIRS_CATEGORIES)} (the PAIRS repository's data/ folder)"
        )
    if any((base / c).is_dir() for c in PAIRS_CATEGORIES):
        return base.resolve()
    if any((base / "data" / c).is_dir() for c in PAIRS_CATEGORIES):
        return (base / "data").resolve()
    raise ImageSetError(
        f"no PAIRS category folder ({', '.join(PAIRS_CATEGORIES)}) under {base} or {base / 'data'}; "
        "point image_root at the PAIRS data/ folder"
    )


class ImageTooLarge(ImageSetError):
    """An image file over the byte cap; never read."""

    def __init__(self, size: int, cap: int) -> None:
        self.size, self.cap = size, cap
        super().__init__(f"the file is {_bytes(size)}, over the cap of {_bytes(cap)}")


def _bytes(n: int) -> str:
    return f"{n:,} bytes ({n / 1024 / 1024:,.1f} MiB)"


def max_image_bytes() -> int:
    """The byte cap of image files: ``$ABLEAUDIT_MAX_IMAGE_BYTES`` when set, else MAX_IMAGE_BYTES."""
    value = os.environ.get(MAX_IMAGE_BYTES_ENV, "").strip()
    if not value:
        return MAX_IMAGE_BYTES
    try:
        cap = int(value.replace("_", ""))
    except ValueError:
        cap = 0
    if cap < 1:
        raise ImageSetError(
            f"{MAX_IMAGE_BYTES_ENV}={value!r} is not a positive whole number of bytes; set it "
            f"to e.g. {MAX_IMAGE_BYTES * 2} or unset it (default {MAX_IMAGE_BYTES})"
        )
    return cap


def read_image_file(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of an image file, its size checked against ``max_bytes`` (default:
    ``max_image_bytes()``) before a byte is read: ImageTooLarge when over, OSError when it
    cannot be read. A file that grows past the cap while being read is refused too."""
    cap = max_image_bytes() if max_bytes is None else max_bytes
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise ImageTooLarge(size, cap)
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ImageTooLarge(len(data), cap)
    return data


def read_image_bytes(root: str | Path, rel_path: str, sha256: str | None = None) -> bytes:
    """The bytes of a landed image, checked against the byte cap (``max_image_bytes()``) before
    they are read and against the sha256 it was landed with after."""
    full, _ = resolve_under(root, rel_path)
    try:
        data = read_image_file(full)
    except ImageTooLarge as e:
        raise ImageSetError(
            f"image {rel_path!r} under {root}: {e}; shrink the image and reload the image set, "
            f"or raise the cap with the environment variable {MAX_IMAGE_BYTES_ENV}"
        ) from None
    except OSError as e:
        raise ImageSetError(
            f"cannot read image {rel_path!r} under {root}: {e}; fix image_root or reload the image set"
        ) from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ImageSetError(
            f"image {rel_path!r} under {root} changed since it was loaded (sha256 differs); "
            "reload the image set (`ableaudit import images ...`), under a new image_set name "
            "if audits already used the old file"
        )
    return data


def image_bytes(image: bytes | ImageRef) -> bytes:
    """An image as a request carries it: bytes as they are, a reference read (and checked) now."""
    if isinstance(image, ImageRef):
        return read_image_bytes(image.root, image.rel_path, image.sha256)
    return image


def image_format(data: bytes) -> str | None:
    """'png' | 'jpeg' | 'gif' | 'webp' from the file signature; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def image_mime(data: bytes) -> str:
    """The MIME type of an encoded image, from its signature: servers reject a data URL
    whose declared type does not match the bytes, so it is sniffed, not assumed."""
    fmt = image_format(data)
    if fmt is None:
        raise ValueError("image bytes are not PNG, JPEG, GIF or WebP (checked the file signature)")
    return f"image/{fmt}"


def image_dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header of a PNG, JPEG, GIF or WebP; None when it cannot be read."""
    fmt = image_format(data)
    try:
        if fmt == "png":
            if data[12:16] != b"IHDR" or len(data) < 24:
                return None
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if fmt == "gif":
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if fmt == "jpeg":
            i = 2
            while i + 9 < len(data):
                if data[i] != 0xFF:
                    i += 1
                    continue
                marker = data[i + 1]
                if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                    i += 1 if marker == 0xFF else 2
                    continue
                length = struct.unpack(">H", data[i + 2 : i + 4])[0]
                if marker in (
                    0xC0,
                    0xC1,
                    0xC2,
                    0xC3,
                    0xC5,
                    0xC6,
                    0xC7,
                    0xC9,
                    0xCA,
                    0xCB,
                    0xCD,
                    0xCE,
                    0xCF,
                ):
                    h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                    return int(w), int(h)
                i += 2 + length
        if fmt == "webp":
            chunk = data[12:16]
            if chunk == b"VP8X":
                w = int.from_bytes(data[24:27], "little") + 1
                h = int.from_bytes(data[27:30], "little") + 1
                return w, h
            if chunk == b"VP8L" and len(data) >= 25:
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8 " and len(data) >= 30:
                w, h = struct.unpack("<HH", data[26:30])
                return int(w & 0x3FFF), int(h & 0x3FFF)
    except struct.error:
        return None
    return None


MAX_IMAGE_PIXELS = 89_478_485
"""The most pixels an image may claim (Pillow's own default warning threshold, about
0.25 GB decoded as RGB): a header claiming more is a decompression bomb or a corrupt
file, and no vision model takes such an image whole."""


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header alone, never decoding the pixels: read by Pillow
    when it is installed (it knows more formats and variants), else by image_dimensions.
    None when the header cannot be read. A size past Pillow's decompression-bomb limit is
    still returned (from the header), so the caller can name it."""
    try:
        import warnings

        from PIL import Image
    except ImportError:
        return image_dimensions(data)
    import io

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                w, h = im.size
        return int(w), int(h)
    except Image.DecompressionBombError:
        return image_dimensions(data) or (MAX_IMAGE_PIXELS + 1, 1)
    except Exception:  # Pillow raises many kinds on a corrupt header; all mean unreadable
        return None


def image_size_problem(data: bytes) -> str | None:
    """Why an image's header is refused (unreadable, empty, or over MAX_IMAGE_PIXELS), or None."""
    fmt = image_format(data)
    dims = image_size(data)
    if dims is None:
        return (
            f"its {(fmt or 'image').upper()} header cannot be read (a truncated or corrupt file); "
            "export the image again"
        )
    w, h = dims
    if w < 1 or h < 1:
        return f"its header claims {w}x{h} pixels; export the image again"
    if w * h > MAX_IMAGE_PIXELS:
        return (
            f"its header claims {w}x{h} pixels ({w * h:,}), over the cap of "
            f"{MAX_IMAGE_PIXELS:,} (a decompression bomb or a corrupt header); resize it below "
            "the cap"
        )
    return None


_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def decode_png(data: bytes) -> Any:
    """Decode an 8-bit, non-interlaced PNG to a ``uint8`` array of shape (height, width, channels).

    Channels: 1 (grey), 2 (grey + alpha), 3 (RGB) or 4 (RGBA); a palette image
    comes back as RGB(A). Anything else raises ValueError naming the fix
    (install Pillow), never a wrong picture.
    """
    import numpy as np

    if image_format(data) != "png":
        raise ValueError("not a PNG file (signature)")
    pos, ihdr, palette, trns, idat = 8, None, None, None, []
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if len(body) != length:
            raise ValueError("truncated PNG chunk")
        if ctype == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif ctype == b"PLTE":
            palette = np.frombuffer(body, dtype=np.uint8).reshape(-1, 3)
        elif ctype == b"tRNS":
            trns = np.frombuffer(body, dtype=np.uint8)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
        pos += 12 + length
    if ihdr is None or not idat:
        raise ValueError("PNG without IHDR or image data")
    width, height, depth, color, _, _, interlace = ihdr
    if depth != 8 or interlace != 0 or color not in _PNG_CHANNELS:
        raise ValueError(
            f"PNG with bit depth {depth}, colour type {color}, interlace {interlace} is not supported "
            "by the built-in decoder; install Pillow"
        )
    channels = _PNG_CHANNELS[color]
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    if raw.size != height * (stride + 1):
        raise ValueError("PNG image data has the wrong size")
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    bpp = channels
    for y in range(height):
        ftype, line = int(rows[y, 0]), rows[y, 1:].astype(np.int32)
        if ftype == 0:
            cur = line
        elif ftype == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 0xFF
        elif ftype == 2:  # Up
            cur = (line + prev) & 0xFF
        elif ftype in (3, 4):  # Average, Paeth: sequential along the row
            cur = np.empty(stride, dtype=np.int32)
            lst, up = line.tolist(), prev.tolist()
            res = [0] * stride
            for i in range(stride):
                a = res[i - bpp] if i >= bpp else 0
                b = up[i]
                if ftype == 3:
                    res[i] = (lst[i] + ((a + b) >> 1)) & 0xFF
                else:
                    c = up[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                    res[i] = (lst[i] + pred) & 0xFF
            cur[:] = res
        else:
            raise ValueError(f"PNG row filter {ftype} is not valid")
        out[y] = cur
        prev = cur
    img = out.reshape(height, width, channels)
    if color == 3:
        if palette is None:
            raise ValueError("palette PNG without a palette")
        idx = img[:, :, 0]
        rgb = palette[idx]
        if trns is not None:
            alpha = np.full(len(palette), 255, dtype=np.uint8)
            alpha[: len(trns)] = trns[: len(palette)]
            img = np.concatenate([rgb, alpha[idx][:, :, None]], axis=2)
        else:
            img = rgb
    return img


def image_data_url(data: bytes) -> str:
    return f"data:{image_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"


_hash_cache: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    """Full sha256 of a file, cached per (path, size, mtime) for the process.

    A GGUF is a few hundred MB to tens of GB; hashing it once per run (not once
    per backend instance) keeps repeated arms cheap.
    """
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _hash_cache:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while block := f.read(chunk):
                h.update(block)
        _hash_cache[key] = h.hexdigest()
    return _hash_cache[key]
