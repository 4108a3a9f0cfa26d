"""A stored .npz's arrays memory-mapped from the blob file, so every process of a host
that reads the same blob shares one copy of its pages (the kernel's page cache).

np.savez writes an uncompressed zip of .npy members, so each member's values lie in the
file as they are: past the zip's local header of the member (its offset is in the
central directory, its length in the local header itself) and the .npy header. Each
array is an `np.memmap` of that range, copy-on-write (`mode="c"`): the pages are the
file's, shared with every other process that maps them, for as long as nobody writes;
a write (no solver writes into X) copies only the pages written, in that process, and
never reaches the blob. The arrays come back writeable, so `np.require(..., "W")` and the
solvers' dtype checks take them as they are (data float64, indices int32: the dtypes the
service stores and the solvers use, no cast, no copy; only indptr, O(rows), is copied on
its way into a SciPy matrix and the solvers: app.infra.storage.csr_from_arrays).

Only a member whose values start at a multiple of their alignment can be mapped (NumPy
and the solvers take misaligned arrays only as copies): `write_npz` stores each member
with its values 64-byte aligned in the file (an extra field of padding in the member's
local header, id 0xD935 as Android's zipalign writes it), so it stays an .npz np.load
reads. A blob written by np.savez (before this) has misaligned members and is read
into memory, per process, as before.

A member that cannot be mapped (compressed, a handle without a file descriptor, an .npy
version or dtype this does not read) makes the whole blob read the ordinary way
(np.load), so older or foreign blobs stay readable. `release` hands a range of a mapped
array's pages back (madvise MADV_DONTNEED: for clean file pages, they leave this
process's resident set and stay in the page cache).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import mmap
import os
import struct
import threading
import zipfile
from typing import Any, BinaryIO, Literal, cast

import numpy as np

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... name length, extra length
_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def read_npz(handle: BinaryIO) -> dict[str, np.ndarray]:
    """Every array of the .npz in `handle`, by member name without `.npy`: mapped when
    the blob allows it, else read into memory. `handle` may be closed afterwards."""
    mapped = map_npz(handle)
    if mapped is not None:
        return mapped
    handle.seek(0)
    with np.load(handle, allow_pickle=False) as blob:
        return {name: blob[name] for name in blob.files}


ALIGN = 64
_ZIP64_EXTRA = 20  # what zipfile adds to a local header written with force_zip64
_PAD_ID = 0xD935


def write_npz(handle: BinaryIO, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed .npz of `arrays` (as np.savez writes one, allow_pickle=False)
    whose every member's values start at a multiple of ALIGN bytes in the file."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, values in arrays.items():
            values = np.asanyarray(values)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            header = _LOCAL_HEADER.size + len(info.filename.encode()) + _ZIP64_EXTRA + 4
            # the .npy header is itself a multiple of 64 bytes long
            pad = -(handle.tell() + header) % ALIGN
            info.extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values, allow_pickle=False)


def map_npz(handle: BinaryIO) -> dict[str, np.ndarray] | None:
    """The arrays mapped from the file (None: some member cannot be mapped)."""
    try:
        handle.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    try:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        return None
    arrays: dict[str, np.ndarray] = {}
    for info in members:
        if (not info.filename.endswith(".npy") or info.compress_type != zipfile.ZIP_STORED
                or info.flag_bits & 0x1 or info.compress_size != info.file_size):
            return None
        array = _map_member(handle, info)
        if array is None:
            return None
        arrays[info.filename[:-4]] = array
    return arrays


def _map_member(handle: BinaryIO, info: zipfile.ZipInfo) -> np.ndarray | None:
    handle.seek(info.header_offset)
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(
        handle.read(_LOCAL_HEADER.size))
    if signature != b"PK\x03\x04":
        return None
    start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    handle.seek(start)
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            return None
    except ValueError:
        return None
    offset = handle.tell()
    if dtype.hasobject or offset % max(dtype.alignment, 1):
        return None
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if offset + nbytes > start + info.file_size:
        return None
    order: Literal["C", "F"] = "F" if fortran else "C"
    if nbytes == 0:
        return np.empty(tuple(shape), dtype=dtype, order=order)
    mapped = np.memmap(cast(Any, handle), dtype=dtype, mode="c", offset=offset,
                       shape=tuple(shape), order=order)
    return mapped.view(np.ndarray)  # a plain array (numba, scipy); keeps the map alive


def is_mapped(array: np.ndarray) -> bool:
    """Whether `array` is (a view of) a memory-mapped file."""
    current: object = array
    while isinstance(current, np.ndarray):
        if isinstance(current, np.memmap) and getattr(current, "_mmap", None) is not None:
            return True
        current = current.base
    return isinstance(current, mmap.mmap)


_READ_CHUNK = 1 << 20  # bytes a read of `prefetch` asks for (its buffer is charged to the cgroup)
_scratch = threading.local()  # each reading thread's buffer of _READ_CHUNK bytes


def prefetch(array: np.ndarray, start: int, stop: int) -> None:
    """Read `array[start:stop]` into the page cache now (a 1-D mapped array; nothing for
    any other), so that touching its pages afterwards takes no read of the disk: the file
    range read in order, 1 MiB a read (pread into a scratch buffer of this thread's,
    discarded), for an array mapped from a named file; madvise MADV_WILLNEED otherwise.
    Call it from a thread that may wait (the out-of-core read-ahead). madvise WILLNEED
    alone did not fill the cache before the pages were touched: a pass over the 1.2 GB
    yahoo-korea-shaped blob in 47 MB blocks faulted 185,000 pages in one by one (12.4 s,
    96 MB/s, 5.3 s of system CPU) where these reads take 2.3 s and 1.0 s (8 MiB reads
    with the readahead on: 0.8 s, but pages beyond the range stayed charged)."""
    if stop <= start or array.ndim != 1 or not is_mapped(array):
        return
    mapped = _memmap_of(array)
    if mapped is None or not mapped.filename:
        base = array.ctypes.data
        first = (base + start * array.itemsize) // _PAGE * _PAGE  # the pages it touches
        last = base + stop * array.itemsize
        _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first),
                      mmap.MADV_WILLNEED)
        return
    origin = int(mapped.offset) + array.ctypes.data - mapped.ctypes.data
    position, end = origin + start * array.itemsize, origin + stop * array.itemsize
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None:
        buffer = _scratch.buffer = memoryview(bytearray(_READ_CHUNK))
    fd = os.open(mapped.filename, os.O_RDONLY)
    try:
        # no readahead past the range: its pages would stay in the page cache (charged
        # to the process's memory cgroup) after the range's own are dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        while position < end:
            got = os.preadv(fd, [buffer[: min(_READ_CHUNK, end - position)]], position)
            if got <= 0:
                break
            position += got
    finally:
        os.close(fd)


def release(array: np.ndarray, start: int, stop: int) -> None:
    """Drop this process's pages of `array[start:stop]` (a 1-D mapped array; nothing
    happens for any other array): the whole pages inside the range leave its resident
    set and are read again from the page cache if touched. The array must be mapped
    copy-on-write and not written to in that range (a write would be discarded)."""
    if stop <= start or array.ndim != 1 or not is_mapped(array):
        return
    base = array.ctypes.data
    first = base + start * array.itemsize
    last = base + stop * array.itemsize
    first = -(-first // _PAGE) * _PAGE  # whole pages inside the range only
    last = last // _PAGE * _PAGE
    if last > first:
        _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first),
                      mmap.MADV_DONTNEED)


def _memmap_of(array: np.ndarray) -> np.memmap | None:
    current: object = array
    while isinstance(current, np.ndarray):
        if isinstance(current, np.memmap) and getattr(current, "_mmap", None) is not None:
            return current
        current = current.base
    return None


def advise_random(array: np.ndarray) -> None:
    """MADV_RANDOM over a mapped array (nothing for any other): a page fault reads that
    page only, not the device's readahead window around it (read_ahead_kb, 8 MB on some
    disks), whose pages of other rows would be charged to the process's memory cgroup
    until released. For a reader that asks for its ranges itself (`prefetch`), in order:
    the out-of-core blocks."""
    if array.size == 0 or not is_mapped(array):
        return
    first = array.ctypes.data // _PAGE * _PAGE
    length = array.ctypes.data + array.nbytes - first
    _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(length), mmap.MADV_RANDOM)


def drop_cached(array: np.ndarray, start: int, stop: int) -> None:
    """Drop the whole pages of the file under `array[start:stop]` (a 1-D array mapped from
    a named file; nothing for any other) from the page cache (POSIX_FADV_DONTNEED): rows
    done with hold no memory of the process's cgroup either. A page shared with the rows
    beyond the range stays."""
    mapped = _memmap_of(array)
    if stop <= start or array.ndim != 1 or mapped is None or not mapped.filename:
        return
    origin = int(mapped.offset) + array.ctypes.data - mapped.ctypes.data
    first = -(-(origin + start * array.itemsize) // _PAGE) * _PAGE
    last = (origin + stop * array.itemsize) // _PAGE * _PAGE
    if last <= first:
        return
    fd = os.open(mapped.filename, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, first, last - first, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
