"""Atomic output: a temp file beside the destination, renamed into place only when complete."""

from __future__ import annotations

import errno
import io
import os
import re
import signal
import stat
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO

from geomcli.constants import NAME_MAX
from geomcli.errors import GeomError


def _umask() -> int:
    """The process umask, read without changing it where /proc allows (os.umask is racy in threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# POSIX ACL entries' tags (linux/posix_acl_xattr.h): owner, owning group, mask, others
_ACL_OWNER, _ACL_GROUP, _ACL_MASK, _ACL_OTHERS = 0x01, 0x04, 0x10, 0x20


def _new_file_mode(folder: str) -> int:
    """The mode open() gives a new file in ``folder``: 0666 less the umask, or where the folder
    has a default ACL (which the kernel then takes instead of the umask), 0666 less what its
    owner, group class (the mask, else the owning group) and others entries do not allow."""
    try:
        acl = os.getxattr(folder, "system.posix_acl_default")
    except (OSError, AttributeError):  # none (ENODATA), no ACLs here, or no xattrs on this system
        return 0o666 & ~_umask()
    if len(acl) < 4 or (len(acl) - 4) % 8:
        return 0o666 & ~_umask()
    perms: dict[int, int] = {tag: perm & 0o7 for tag, perm, _ in struct.iter_unpack("<HHI", acl[4:])}
    group = perms.get(_ACL_MASK, perms.get(_ACL_GROUP, 0))
    return 0o666 & (perms.get(_ACL_OWNER, 0) << 6 | group << 3 | perms.get(_ACL_OTHERS, 0))


@contextmanager
def atomic_file(path: str) -> Iterator[IO[bytes]]:
    """Yield a binary file; on normal exit it replaces ``path``, on any exception it vanishes.

    The temp file is made by tempfile.mkstemp (O_CREAT | O_EXCL, so never through a symlink) in the
    destination folder, so the final os.replace is a rename within one filesystem: readers see
    the old file or the new one, never a part. KeyboardInterrupt and SystemExit clean up too.
    Inside :func:`deferred_commits`, the last step (sync and rename) is left to its caller.
    Inside :func:`no_replace`, a file (or device, or pipe) at ``path`` is never replaced; inside
    it or :func:`files_only`, a device or pipe there is never written into.
    """
    stream = _open_stream(path) if _here.into_streams else None
    if stream is not None:
        with _into_stream(stream, path) as f:
            yield f
        return
    with _replacing(path, defer=_here.pending is not None) as (fd, tmp):
        raw = io.FileIO(fd, "wb")
        # the temp path, not the fd number, as the name: tifffile takes the folder from it
        raw.name = tmp
        with io.BufferedWriter(raw) as f:
            yield f


# /proc/self/fd/N, /proc/<this pid>/fd/N, /dev/fd/N: an open descriptor of this process
_DESCRIPTOR_PATH = re.compile(r"/proc/(self|thread-self|\d+)/fd/(\d+)|/dev/fd/(\d+)")


def _own_descriptor(path: str) -> int | None:
    """N when ``path`` names, itself or through its links, this process's descriptor N
    (/dev/stdout is a link to /proc/self/fd/1); else None."""
    for _ in range(40):  # the kernel's own limit on links followed
        match = _DESCRIPTOR_PATH.fullmatch(os.path.normpath(os.path.abspath(path)))
        if match is not None:
            process, number, dev_number = match.groups()
            if process in (None, "self", "thread-self") or int(process) == os.getpid():
                return int(number or dev_number)
        try:
            target = os.readlink(path)
        except OSError:
            return None
        path = os.path.join(os.path.dirname(path), target)
    return None


def is_stdout(path: str) -> bool:
    """Whether an output ``path`` is standard output: ``-``, /dev/stdout, /dev/fd/1 and the like."""
    return path == "-" or _own_descriptor(path) == 1


def is_stdin(path: str) -> bool:
    """Whether an input ``path`` is standard input: ``-``, /dev/stdin, /dev/fd/0 and the like."""
    return path == "-" or _own_descriptor(path) == 0


def writes_into(output: str, path: str) -> bool:
    """Whether writing ``output``, where it is one of this process's descriptors (``-``,
    /dev/stdout, /dev/fd/3), would write into the file ``path`` (``-``: stdin's) reads: the shell
    opened it there, ``>> input.npy`` or ``1<> input.npy``, and the result would land in the input."""
    number = 1 if output == "-" else _own_descriptor(output)
    if number is None:
        return False
    try:
        written = os.fstat(number)
        read = os.fstat(0) if is_stdin(path) else os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(written.st_mode) and (written.st_dev, written.st_ino) == (read.st_dev, read.st_ino)


def is_special(path: str) -> bool:
    """Whether ``path`` is, or links to, a device, FIFO or socket (/dev/null, a named pipe) or
    one of this process's descriptors (/dev/stdout): a stream to write into, which no file may
    replace. (A link to a plain file is replaced by the new file, never written through.)"""
    return _own_descriptor(path) is not None or _is_stream(path)


def _open_stream(path: str) -> int | None:
    """A descriptor to write into when ``path`` is a stream (see is_special); None for a file
    (new, plain or through a link), which is replaced instead. The test is made again on the
    opened descriptor, so a link swapped meanwhile cannot have a plain file written through."""
    own = _own_descriptor(path)  # standard output itself takes write_array's way for "-"
    if own is not None:
        try:
            return os.dup(own)
        except OSError as e:
            raise GeomError(f"{path}: cannot write ({e.strerror or e})") from e
    if not _is_stream(path):
        return None  # a file, new or plain: never opened here (a watcher would see it written)
    try:  # neither created nor truncated
        descriptor = os.open(path, os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise GeomError(f"{path}: cannot write ({e.strerror or e})") from e
    if not _is_stream(descriptor):  # a link swapped since the look: the file is replaced instead
        os.close(descriptor)
        return None
    return descriptor


def _is_stream(where: str | int) -> bool:
    """Whether the path or descriptor ``where`` is a device, FIFO or socket (False if it is not there)."""
    try:
        mode = os.stat(where).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextmanager
def _into_stream(descriptor: int, path: str) -> Iterator[IO[bytes]]:
    """Yield a buffer; at normal exit its bytes go to the open stream ``descriptor`` (as the
    shell's ``>`` would write them: no temp file, rename or fsync), which is closed either way.
    Made whole first, so a failed encoding sends nothing; binary data is never sent to a
    terminal; a failed write is :func:`write_all`'s."""
    try:
        if os.isatty(descriptor):
            raise GeomError(f"{path}: refusing to write binary data to a terminal")
        buffer = io.BytesIO()
        yield buffer
        write_all(descriptor, buffer.getbuffer(), path)
    finally:
        os.close(descriptor)


def write_all(descriptor: int, data: bytes | memoryview, name: str) -> None:
    """Every byte of ``data`` to ``descriptor``, waiting whenever it is a full non-blocking pipe
    (a parent may have set O_NONBLOCK on the pipe it gave us: os.write then raises EAGAIN).
    A reader gone (BrokenPipeError) is left to the caller: the run ends quietly, as with -o -;
    any other OSError becomes a GeomError naming ``name``, the output as the user named it."""
    import select

    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(descriptor, view) :]
            except BlockingIOError:
                select.select([], [descriptor], [])
    except BrokenPipeError:
        raise
    except OSError as e:
        raise GeomError(f"{name}: cannot write ({e.strerror or e})") from e


class OutputExistsError(GeomError):
    """Inside :func:`no_replace`: a file was found at the output's name when the output was
    complete (made after the caller last looked); it was left as it was, the temp file removed."""


class _ThisThread(threading.local):
    pending: list[Callable[[], None]] | None = None  # deferred_commits' list
    replace = True  # False inside no_replace
    into_streams = True  # False inside no_replace and files_only
    remake_folder = False  # True inside remaking_folder
    cancelled: Callable[[], bool] | None = None  # stopped_when's condition


_here = _ThisThread()


@contextmanager
def deferred_commits() -> Iterator[list[Callable[[], None]]]:
    """While open (in this thread), :func:`atomic_file` leaves its temp file complete but unsynced
    and unrenamed at exit, and appends to the list yielded the step that syncs and renames it
    (or removes it and raises GeomError, as atomic_file would have). A batch worker runs that
    step on another thread while it reads its next file. Until the step has run, the temp file
    is a leftover as after a kill: remove_leftovers clears it."""
    _here.pending = []
    try:
        yield _here.pending
    finally:
        _here.pending = None


def replaces() -> bool:
    """Whether an output made now may replace a file (False inside :func:`no_replace`)."""
    return _here.replace


def defer(commit: Callable[[], None]) -> bool:
    """Inside :func:`deferred_commits`, leave ``commit`` (what places an output made elsewhere, an
    object put, say) to its caller, and say so; False outside, where the caller commits now."""
    if _here.pending is None:
        return False
    _here.pending.append(commit)
    return True


class Cancelled(GeomError):
    """Inside :func:`stopped_when`: the output was complete, but the work it was made for had been
    cancelled; it was not placed (its temp file removed, its upload aborted)."""


@contextmanager
def stopped_when(cancelled: Callable[[], bool]) -> Iterator[None]:
    """While open (in this thread), no output is placed once ``cancelled()`` is true (a Dask task
    its client cancelled, whose worker goes on): where a signal taken would stop it
    (:func:`refuse_after_signal`), its temp file is removed and Cancelled raised instead, and an
    object's multipart upload under way is aborted before its next part."""
    previous, _here.cancelled = _here.cancelled, cancelled
    try:
        yield
    finally:
        _here.cancelled = previous


def cancellation() -> Callable[[], bool] | None:
    """The condition :func:`stopped_when` set in this thread, for work this thread hands to another."""
    return _here.cancelled


@contextmanager
def no_replace() -> Iterator[None]:
    """While open (in this thread), :func:`atomic_file`, :func:`atomic_path` and
    :func:`atomic_folder` never replace a file (nor a folder): one found at the destination when
    the output is complete, even one made a moment before, is left as it is, and
    OutputExistsError is raised (after the temp file is removed). Their deferred commits keep
    this rule wherever they run. See :func:`_place_new` for file systems without hard links."""
    previous, _here.replace = _here.replace, False
    try:
        with files_only():
            yield
    finally:
        _here.replace = previous


@contextmanager
def files_only() -> Iterator[None]:
    """While open (in this thread), :func:`atomic_file` replaces a device, pipe or socket found at
    the destination, or a link to one, with the new file instead of writing into it: in a folder
    of outputs, a pipe made there after the caller looked would wait for a reader forever."""
    previous, _here.into_streams = _here.into_streams, False
    try:
        yield
    finally:
        _here.into_streams = previous


@contextmanager
def remaking_folder() -> Iterator[None]:
    """While open (in this thread), a temp file whose folder is gone makes that folder again: a
    batch's output folder, made before its input was read, that another run into the same
    --out-dir removed meanwhile (a run that writes no file removes the folders it made, and
    make -j runs one geomcli per file)."""
    previous, _here.remake_folder = _here.remake_folder, True
    try:
        yield
    finally:
        _here.remake_folder = previous


# how often remaking_folder makes a vanished folder again for one temp file (each run that
# removes it does so once)
_REMAKES = 3


def _temp_beside(path: str) -> tuple[int, str]:
    """A new temp file in ``path``'s folder (tempfile.mkstemp: O_CREAT | O_EXCL, never through a
    symlink, mode 0600), named as remove_leftovers expects."""
    import tempfile

    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise GeomError(f"{path}: is a directory")
    remakes = _REMAKES if _here.remake_folder else 0
    try:
        while True:
            try:
                fd, tmp = tempfile.mkstemp(_TEMP_SUFFIX, _hidden(os.path.basename(path), _TEMP_TAIL) + ".", folder)
                return fd, os.path.abspath(tmp)
            except FileNotFoundError:
                if not remakes:
                    raise
                remakes -= 1
                with suppress(OSError):  # what stops it stops mkstemp next, which says why
                    os.makedirs(folder, exist_ok=True)
    except FileExistsError as e:
        raise GeomError(f"{path}: cannot make a temp file in {folder} (every name tried exists)") from e
    except FileNotFoundError as e:
        if os.path.isdir(folder):  # /proc/self and the like: a folder that takes no new files
            raise GeomError(f"{path}: cannot create a file in {folder}") from e
        raise GeomError(f"{path}: folder {folder} does not exist") from e
    except NotADirectoryError as e:
        raise GeomError(f"{path}: {folder} is not a folder") from e
    except PermissionError as e:
        raise GeomError(f"{path}: permission denied") from e
    except OSError as e:
        raise GeomError(f"{path}: cannot write ({e.strerror or e})") from e


@contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield the name of an empty temp file to fill by name (a memory map, say); on normal exit
    it is synced and replaces ``path``, on any exception it vanishes.

    The same temp file, permissions and cleanup as :func:`atomic_file` (KeyboardInterrupt and
    SystemExit included), for writers that open the file themselves; inside
    :func:`deferred_commits`, the sync and rename are left to its caller, as atomic_file's: a
    batch's placing step sends the output's report with it, where a memory-mapped output (or a
    zarr folder, atomic_folder) renamed here was in place with no record when a signal stopped
    the worker before that step.
    """
    if is_special(path):
        raise GeomError(f"{path}: a device or pipe cannot be written through a memory map")
    with _replacing(path, defer=_here.pending is not None) as (fd, tmp):
        os.close(fd)
        yield tmp


@contextmanager
def atomic_folder(path: str, *, replace: bool | None = None) -> Iterator[str]:
    """Yield the name of a hidden sibling of ``path``, not made yet, for a writer to make a folder
    at (a zarr array); on normal exit it replaces ``path``, on any exception it is removed and
    what is at ``path`` is left as it was.

    Inside :func:`deferred_commits`, the renames are left to its caller, as atomic_file's.
    A folder is not renamed over a full one, so replacing takes two renames: what is at ``path``
    goes aside, then the new folder in (and if that fails, the old one back). Ctrl-C and SIGTERM
    wait over the two (see hold_signals), and once one has come nothing is placed (see
    signals_taken). Inside :func:`no_replace`, whatever is found at ``path`` when the folder is
    complete, even if made a moment before, is left as it is, and OutputExistsError is raised
    (after the new folder is removed); only an empty folder made in the instant between the last
    look and the rename is replaced, as rename(2) replaces one. ``replace``: whether it may
    replace what is there, where the caller knows better (None: this rule).
    """
    if replace is None:
        replace = _here.replace  # the rule when the output was begun
    temporary = _folder_beside(path)
    with _folder_removed_on_error(temporary):
        yield temporary
        if _here.pending is not None:  # placed by deferred_commits' caller, as atomic_file's (atomic_path)
            _here.pending.append(lambda: _commit_folder(temporary, path, replace))
        else:
            _swap_in(temporary, path, replace)


def _commit_folder(temporary: str, path: str, replace: bool) -> None:
    """A deferred :func:`_swap_in`, with the cleanup atomic_folder would have given it."""
    with _folder_removed_on_error(temporary):
        _swap_in(temporary, path, replace)


@contextmanager
def _folder_removed_on_error(temporary: str) -> Iterator[None]:
    try:
        yield
    except BaseException:
        _remove_entry(temporary)
        raise


# atomic_folder's names beside NAME: .NAME.geomcli-XXXXXXXX (8 hex digits) while the folder is
# made, and that with ASIDE for what it replaces between the two renames; remove_leftovers' too
_FOLDER_MARK, _ASIDE = ".geomcli-", "-old"


def _folder_beside(path: str) -> str:
    """A new name for a folder beside ``path`` (``path/`` too), as :func:`_folders_beside` finds it."""
    folder, name = _split(path)
    return os.path.join(folder, f"{_hidden(name, _FOLDER_TAIL)}{_FOLDER_MARK}{os.urandom(4).hex()}")


def _folders_beside(name: str) -> re.Pattern[str]:
    """The names :func:`atomic_folder` gives its folders beside ``name``, and their asides."""
    return re.compile(re.escape(f"{_hidden(name, _FOLDER_TAIL)}{_FOLDER_MARK}") + "[0-9a-f]{8}"
                      + f"({re.escape(_ASIDE)})?")


# what follows ``.NAME`` in a hidden name beside NAME: mkstemp's ".XXXXXXXX.tmp", and
# atomic_folder's ".geomcli-XXXXXXXX-old"
_TEMP_SUFFIX = ".tmp"
_TEMP_TAIL = len(f".XXXXXXXX{_TEMP_SUFFIX}")
_FOLDER_TAIL = len(f"{_FOLDER_MARK}XXXXXXXX{_ASIDE}")


def is_leftover_name(name: str) -> bool:
    """Whether ``name`` is one this module gives a temp file or folder beside an output, which
    :func:`remove_leftovers` of that output removes: no output may be named so.

    >>> is_leftover_name(".a.png.k3x_9q2z.tmp"), is_leftover_name(".a.zarr.geomcli-0a1b2c3d-old")
    (True, True)
    >>> is_leftover_name("a.png.k3x_9q2z.tmp"), is_leftover_name(".a.png")
    (False, False)
    """
    return _LEFTOVER.fullmatch(name) is not None


_LEFTOVER = re.compile(r"\..+(\.[a-z0-9_]{8}" + re.escape(_TEMP_SUFFIX) + "|" + re.escape(_FOLDER_MARK)
                       + "[0-9a-f]{8}(" + re.escape(_ASIDE) + ")?)", re.DOTALL)


def _hidden(name: str, tail: int) -> str:
    """``.NAME``, the start of a hidden name beside NAME that ``tail`` more bytes end within
    NAME_MAX: a NAME too long for that (an output's name of 243 to 255 bytes could not be
    written) is cut, and ends in a hash of it, so that the names beside each NAME stay its own
    (remove_leftovers sweeps no other output's)."""
    import hashlib

    hidden = os.fsencode(f".{name}")
    if len(hidden) + tail <= NAME_MAX:
        return f".{name}"
    digest = hashlib.blake2b(hidden, digest_size=4).hexdigest()
    cut = NAME_MAX - tail - len(digest) - 1
    # never inside a UTF-8 character: back to its lead byte, at most 3 continuations before the
    # cut; bytes that are no character (a Latin-1 name's) are cut where the length says
    start = cut
    while start > max(1, cut - 3) and hidden[start] & 0xC0 == 0x80:
        start -= 1
    if hidden[start] & 0xC0 == 0xC0:
        cut = start
    return os.fsdecode(hidden[:cut]) + "~" + digest


def _split(path: str) -> tuple[str, str]:
    """The folder and the name of ``path``, a folder's given as ``path/`` too."""
    return os.path.split(os.path.abspath(path.rstrip("/") or path))


def _swap_in(temporary: str, path: str, replace: bool) -> None:
    """The complete folder ``temporary`` becomes ``path``: what is there renamed aside, the new
    one in, then what was there removed; if the second rename fails, the first is undone.
    ``replace`` False: anything there is OutputExistsError. An OSError becomes a GeomError
    naming ``path``."""
    aside = None
    release = hold_signals()
    try:
        refuse_after_signal()
        if os.path.lexists(path):
            if not replace:
                raise appeared(path)
            aside = f"{temporary}{_ASIDE}"
            os.rename(path, aside)
        try:
            os.rename(temporary, path)
        except OSError as error:
            if aside is not None:
                restore, aside = aside, None  # never removed: if renaming it back fails, it is all there is
                os.rename(restore, path)
            elif not replace and os.path.lexists(path):  # a file or full folder made since the look
                raise appeared(path) from error
            raise
    except OSError as error:
        raise GeomError(f"{path}: cannot write ({error.strerror or error})") from error
    finally:
        try:
            release()  # a signal held meanwhile is raised here: the new folder is in place, whole
        finally:
            if aside is not None:
                _remove_entry(aside)


def _remove_entry(path: str) -> None:
    """Remove what is at ``path``: a folder with all it holds (what of it can be), else the name
    alone (a file, or a link, never what it points to)."""
    import shutil

    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _take_over(fd: int, path: str) -> None:
    """Give the temp file the permissions of the file it replaces (as root, its owner and group
    too), so overwriting a 0600 output keeps it 0600; a new file gets the mode a plain open()
    would give it (the temp file is made 0600): 0666 less the umask, or as the folder's default ACL
    says. Set-id bits are not carried over."""
    try:
        replaced = os.stat(path)
    except OSError:
        replaced = None  # no file there yet (or none we may look at): a new file's mode
    if replaced is None or not stat.S_ISREG(replaced.st_mode):
        os.fchmod(fd, _new_file_mode(os.path.dirname(path) or "."))
        return
    if os.geteuid() == 0 and (replaced.st_uid, replaced.st_gid) != (os.geteuid(), os.getegid()):
        os.fchown(fd, replaced.st_uid, replaced.st_gid)  # before the chmod, which it would reset
    os.fchmod(fd, stat.S_IMODE(replaced.st_mode) & 0o777)


# The signals that stop a run as Ctrl-C does, with its cleanup: SIGHUP too, as a closed terminal
# or a dropped ssh session sends it, and SIGXCPU, as a soft CPU time limit (ulimit -St) does; each killed
# a run where it stood, its temp file left behind.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGXCPU)

# The signals (STOP_SIGNALS) the command line's handlers have taken (note_signal). A handler
# raises, but Python can run it where its exception vanishes: inside an import's compile(), for
# one (seen: SIGTERM mid-write, then exit 0 and the new output in place, 1 run in 4 on a busy
# machine; batch workers exit at once for that reason). So no output is placed once one has
# come, whatever became of its exception.
signals_taken: list[int] = []


def note_signal(signum: int) -> None:
    """A handler of the command line's took ``signum``: no output is placed from now on."""
    signals_taken[:] = [signum]


def clear_signals() -> None:
    """A new command starts (or one has ended): outputs may be placed again."""
    signals_taken.clear()


# Above 0 while a batch's report is counted and shown (signals_deferred).
_deferring = 0


@contextmanager
def signals_deferred() -> Iterator[None]:
    """A stop signal's exception held back to the end of the block, which raises it then: the
    command line's handlers only note a first one that comes inside (see deferring). A second
    raises at once, so a block stuck writing to a pipe nobody reads cannot hold the run."""
    global _deferring
    before = signal_taken()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    taken = signal_taken()
    if not _deferring and before is None and taken is not None:  # (one that came inside: no Cancelled here)
        raise KeyboardInterrupt if taken == signal.SIGINT else SystemExit(128 + taken)


def deferring() -> bool:
    """Whether a handler taking a first stop signal should only note it (signals_deferred)."""
    return _deferring > 0


def signal_taken() -> int | None:
    """The signal that stopped the run, once one has."""
    return signals_taken[-1] if signals_taken else None


def refuse_after_signal() -> None:
    """Raise what a signal taken (see signals_taken) should have raised: KeyboardInterrupt for
    SIGINT, SystemExit(128 + n) for another; and Cancelled once this thread's work has been
    cancelled (see :func:`stopped_when`)."""
    if signals_taken:
        taken = signals_taken[-1]
        raise KeyboardInterrupt if taken == signal.SIGINT else SystemExit(128 + taken)
    if _here.cancelled is not None and _here.cancelled():
        raise Cancelled("the task was cancelled before its output was placed")


def hold_signals() -> Callable[[], None]:
    """Hold STOP_SIGNALS back (in the main thread, where Python runs their handlers); the
    function returned restores the handlers and delivers what came meanwhile. An ignored one
    (nohup's SIGHUP) stays ignored: a process started meanwhile (a LocalCluster's) inherits that."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    held: list[int] = []
    previous = {number: signal.signal(number, lambda got, frame: held.append(got)) for number in STOP_SIGNALS
                if signal.getsignal(number) != signal.SIG_IGN}

    def release() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for got in held:
            signal.raise_signal(got)

    return release


@contextmanager
def _replacing(path: str, defer: bool = False) -> Iterator[tuple[int, str]]:
    """A temp file beside ``path`` (descriptor, name) to write; at normal exit it gets its
    permissions (see _take_over), is synced and renamed to ``path`` (``defer``: that step goes
    to deferred_commits' list instead); on any exception (KeyboardInterrupt and SystemExit too)
    it is removed, and an OSError becomes a GeomError naming ``path``. A signal that comes while
    the file is being made waits until its cleanup is in place, so an interrupt never leaves it
    behind."""
    replace = _here.replace  # the rule when the output was begun, wherever its commit runs
    release = hold_signals()
    try:
        fd, tmp = _temp_beside(path)
    except BaseException:
        release()
        raise
    with _removed_on_error(tmp, path):  # one block: no moment without the cleanup in place
        release()
        yield fd, tmp
        if defer and _here.pending is not None:
            _here.pending.append(lambda: _commit(tmp, path, replace))
        else:
            _place(tmp, path, replace)


def _commit(tmp: str, path: str, replace: bool) -> None:
    """A deferred :func:`_place`, with the cleanup atomic_file would have given it."""
    with _removed_on_error(tmp, path):
        _place(tmp, path, replace)


def _place(tmp: str, path: str, replace: bool = True) -> None:
    """The complete temp file ``tmp`` becomes ``path``: its final permissions, synced, renamed
    (``replace`` False: placed only where no file is, see :func:`_place_new`)."""
    descriptor = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        # the final mode only now: the temp file's 0600 lets a writer reopen it by name, even when it
        # is to replace a read-only file
        _take_over(descriptor, path)
        # on disk before the rename, so a crash cannot leave an empty "finished" file
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    refuse_after_signal()
    if replace:
        os.replace(tmp, path)
    else:
        _place_new(tmp, path)


def appeared(path: str) -> OutputExistsError:
    """The error of an output whose name a file took while the output was made (see no_replace)."""
    return OutputExistsError(f"{path}: a file appeared at the output's name while the output was made; it was "
                             "not replaced")

# errnos of a file system that makes no hard links (FAT, exFAT, some network and FUSE mounts)
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.ENOSYS)


def _place_new(tmp: str, path: str) -> None:
    """``tmp`` becomes ``path`` only if no file (nor link, device, pipe) is there: a hard link
    fails with EEXIST where a rename would replace, then the temp name goes. On a file system
    without hard links, a last look is taken just before a plain rename: a file made between
    the two is replaced (the window is microseconds, not the run's length)."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError as error:
        raise appeared(path) from error
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(path):
            raise appeared(path) from error
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextmanager
def _removed_on_error(tmp: str, path: str) -> Iterator[None]:
    """On any exception, remove the temp file; an OSError becomes a GeomError naming ``path``."""
    try:
        yield
    except BaseException as e:
        # numpy reports a short write ("N requested and M written") with no errno: say why
        # (looked at before the temp file's blocks are freed)
        short = _short_write(tmp) if isinstance(e, OSError) and e.errno is None else None
        left = ""
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        except OSError as error:  # (an append-only folder): the first error stays the one told, and the file is named
            left = f"; its temporary file {tmp} is left ({error.strerror or error})"
        if isinstance(e, OSError):
            raise GeomError(f"{path}: cannot write ({short or e.strerror or e}){left}") from e
        raise


def _short_write(path: str) -> str | None:
    """Why a write to ``path`` came out short: the process's file size limit (ulimit -f) reached,
    or less than 1 MiB left on its filesystem; None if neither."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        if limit != resource.RLIM_INFINITY and os.stat(path).st_size >= limit:
            return os.strerror(errno.EFBIG)
        fs = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return None
    return os.strerror(errno.ENOSPC) if fs.f_bfree * fs.f_frsize < 1 << 20 else None


def remove_leftovers(path: str) -> list[str]:
    """Remove what a writer of ``path`` leaves when its process dies without running its cleanup
    (SIGKILL, or a worker ended by os._exit while it was making one): the temp files of
    ``atomic_file(path)``, the folders of ``atomic_folder(path)``; the names removed. An old
    folder (or file) set aside when nothing has taken its place (the writer died between the two
    renames) is renamed back instead.

    For a caller that stopped a writer of ``path`` and knows no other writer of it is running.
    """
    folder, name = _split(path)
    # the temp names: the prefix, mkstemp's 8 random characters, the suffix
    temp = re.compile(re.escape(f"{_hidden(name, _TEMP_TAIL)}.") + r"[a-z0-9_]{8}" + re.escape(_TEMP_SUFFIX))
    folders = _folders_beside(name)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for found in names:
        where = os.path.join(folder, found)
        if temp.fullmatch(found):
            try:
                os.unlink(where)
                removed.append(where)
            except FileNotFoundError:
                pass
        elif folders.fullmatch(found):
            if found.endswith(_ASIDE) and not os.path.lexists(os.path.join(folder, name)):
                try:
                    os.rename(where, os.path.join(folder, name))
                except OSError:
                    pass  # never removed: it is all there is of the old output
                continue
            _remove_entry(where)
            removed.append(where)
    return removed


def to_stdout(payload: bytes, name: str = "<stdout>") -> None:
    """Write bytes to standard output (``name``: how the user named it, ``-`` or /dev/stdout); a
    BrokenPipeError is left to the caller (ends quietly)."""
    sys.stdout.flush()
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):  # a stream in memory, as in tests
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return
    # os.write, not the buffered stream: a large buffered write into a pipe whose reader has
    # gone can report success, and the caller must see the BrokenPipeError.
    write_all(descriptor, payload, name)


def refuse_terminal(what: str, name: str = "<stdout>") -> None:
    """Refuse binary data for a terminal, or for a standard output that is closed."""
    if sys.stdout is None:
        raise GeomError(f"{name}: standard output is closed" + ("; give -o FILE" if name == "<stdout>" else ""))
    if sys.stdout.isatty():
        raise GeomError(
            f"{name}: refusing to write binary {what} data to a terminal; "
            "redirect it (> file, | command) or give -o FILE"
        )
