"""A PNG read into pixels, enough for Chromium's screenshots (8-bit RGB or RGBA, not
interlaced): the browser test looks at what it drew without an imaging library."""

from __future__ import annotations

import struct
import zlib

import numpy as np
from numpy.typing import NDArray

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4}  # colour type: RGB, RGBA


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the header."""
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def read_png(data: bytes) -> NDArray[np.uint8]:
    """The pixels, as rows × columns × channels."""
    assert data[:8] == SIGNATURE, "not a PNG"
    position, compressed = 8, []
    width = height = channels = 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _method, _filter, interlace = struct.unpack(
                ">IIBBBBB", body
            )
            assert depth == 8 and colour in CHANNELS and not interlace, (depth, colour)
            channels = CHANNELS[colour]
        elif kind == b"IDAT":
            compressed.append(body)
        position += 12 + length
    stride = width * channels
    lines = np.frombuffer(zlib.decompress(b"".join(compressed)), dtype=np.uint8)
    lines = lines.reshape(height, stride + 1)
    pixels = np.zeros((height, stride), dtype=np.uint8)
    above: NDArray[np.int64] = np.zeros(stride, dtype=np.int64)
    for row in range(height):
        line = _unfiltered(int(lines[row, 0]), lines[row, 1:].astype(np.int64), above, channels)
        pixels[row] = line
        above = line
    return pixels.reshape(height, width, channels)


def _unfiltered(
    kind: int, line: NDArray[np.int64], above: NDArray[np.int64], channels: int
) -> NDArray[np.int64]:
    """One line undone of its filter (PNG's five: none, sub, up, average, Paeth)."""
    if kind == 0:
        return line
    if kind == 1:  # each byte adds the one a pixel to its left: a running sum per channel
        return np.cumsum(line.reshape(-1, channels), axis=0).reshape(-1) % 256
    if kind == 2:
        return (line + above) % 256
    done = [0] * len(line)
    raw, up = line.tolist(), above.tolist()
    for index, value in enumerate(raw):
        left = done[index - channels] if index >= channels else 0
        upper_left = up[index - channels] if index >= channels else 0
        if kind == 3:
            predicted = (left + up[index]) // 2
        else:
            guess = left + up[index] - upper_left
            predicted = min((left, up[index], upper_left), key=lambda option: abs(guess - option))
        done[index] = (value + predicted) & 255
    return np.array(done, dtype=np.int64)
