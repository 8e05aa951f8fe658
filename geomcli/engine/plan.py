"""The plan of a run over many files, made and checked before anything is written: inputs from
files, folders and globs; output names from a template; and every fault the names show (two
inputs for one output, an output over any input, a name that leaves --out-dir) as a PlanError,
a usage fault (exit 2), with no file touched. ``--dry-run`` is the plan with each output's shape
read from the headers alone.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import string
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from geomcli.constants import NAME_MAX
from geomcli.engine import summary
from geomcli.engine.one_file import (
    FormatConflictError,
    check_writable,
    header_as_read,
    header_fault,
    judged_by,
    output_format,
    planned_metadata,
    planned_shape,
    unnamed_warning,
)
from geomcli.engine.options import unused_by_result, unused_options, write_options
from geomcli.engine.report import OUTPUT_EXISTS, echo_stderr, reporting
from geomcli.errors import GeomError, PlanError
from geomcli.io import _zarr  # a zarr array (a folder) is one input, as a file is

if TYPE_CHECKING:
    from geomcli.engine.operations import Operation
    from geomcli.engine.options import BatchOptions, Common
    from geomcli.engine.summary import Report
    from geomcli.io import Header
    from geomcli.io._remote import Entry

FIELDS = ("stem", "suffix", "name", "parent", "index")
# the files a folder's walk takes, as a message names them
READ_SUFFIXES = "(.png, .jpg, .bmp, .gif, .webp, .npy, .tiff, .zarr)"
T = TypeVar("T")
U = TypeVar("U")
_GLOB_MAGIC = re.compile(r"[*?[]")


@dataclass(frozen=True)
class Task:
    """What is done to every file of a run; picklable, so each worker receives it once."""

    operation: Operation
    common: Common
    no_clobber: bool = False  # -n: no output replaces a file, even one made during the run
    code: str | None = None  # on a cluster: the geomcli its workers must run (scheduler.code_fingerprint)
    # on a cluster: the stores earlier tasks took for dead (io._remote.dead_stores), not asked by this one
    dead_stores: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """An input file and its folder relative to the folder or glob that found it ("" at the top);
    or, with ``error``, a folder that could not be listed: one failure of the run."""

    path: str
    parent: str
    error: str | None = None
    size: int | None = None  # bytes, where a listing told them (URLs)


@dataclass
class Listing:
    """How far a plan's listing of its inputs has come: what the summary of a run a signal stops
    meanwhile counts (a folder of a million files takes seconds to walk, a bucket's minutes)."""

    found: int = 0  # the inputs found so far (a local folder's or glob's one by one, a URL's when listed)
    finished: bool = False


@dataclass(frozen=True)
class Job:
    index: int
    input: str
    output: str
    format: str
    error: str | None = None  # the input was never found: a folder that could not be listed
    size: int | None = None  # the input's bytes, where its listing told them (a task's share of work)
    # --skip-existing: when the newest file the options read (--grid, --theta) was changed; make
    # takes it as a prerequisite of every output, as the input is of its own
    options_read_at: int | None = None
    # the input's bytes, where the check of its header read it whole (a small object: see
    # io._remote.keeping_small_reads): its run reads them, not the object again
    data: bytes | None = field(default=None, repr=False)


def plan(arguments: Sequence[str], options: BatchOptions, common: Common,
         files_read: Sequence[tuple[str, str]] = (), stdin_read: bool = False,
         listing: Listing | None = None) -> list[Job]:
    """Every input with its output path and format; usage errors for names that cannot work.
    ``files_read``, (option, path) of the files the operation read (Operation.files_read), are
    inputs too: no output may replace them. ``stdin_read``: an option read stdin (--theta -), a
    prerequisite of every output with no time of its own, so --skip-existing skips none.
    ``listing`` is kept told how far the listing of the inputs has come."""
    from geomcli import io
    from geomcli.io import _remote

    _remote.configure(common.storage_options)
    _remote.forget()  # what earlier listings in this process told is looked at again
    options = local_paths(options)
    remote = _remote.is_url(options.out_dir)
    if remote:
        _filesystem(options.out_dir)
    if remote and _remote.protocol(options.out_dir) in _remote.READ_ONLY:
        raise PlanError(f"{options.out_dir}: {_remote.protocol(options.out_dir)}:// is for reading; write to "
                        "s3://, gs://, az:// or a folder", options="--out-dir")
    if not options.out_dir or (os.path.exists(options.out_dir) and not os.path.isdir(options.out_dir)):
        raise PlanError(f"{options.out_dir!r} is not a folder", options="--out-dir")
    fields = check_template(options.name)
    listed = () if options.files_from is None else read_list(options.files_from)
    if not arguments and not listed:
        raise PlanError(f"{options.files_from} lists no input", options="--files-from")
    passed_over: list[str] = []
    folders_left: list[str] = []
    sources = expand(arguments, options.recursive, listed, out_dir=options.out_dir, passed_over=passed_over,
                     folders_left=folders_left, listing=listing)
    if passed_over and not common.quiet:
        echo_stderr(f"Warning: {passed_over_text(passed_over)}")
    if folders_left and not common.quiet:
        echo_stderr(f"Warning: {folders_left_text(folders_left)}")
    # An input is its name, the file read through its links, and that file's device and inode (a
    # hard link): an output landing on any of them would destroy an input, its own included.
    inputs: dict[str | tuple[int, int], str] = {}
    # each folder's links are followed once for this plan, not once a file (20,000 files in 200
    # folders: 40,000 looks, a fifth of a --skip-existing re-run)
    folder_realpath = functools.cache(os.path.realpath)
    for source in sources:
        if source.error is None:
            inputs.setdefault(_landing(source.path, folder_realpath), source.path)
            inputs.setdefault(_real(source.path), source.path)
            identity = _identity(source.path)
            if identity is not None:
                inputs.setdefault(identity, source.path)
    read_by: dict[str | tuple[int, int], str] = {}  # the files options read, as inputs are known
    for option, path in files_read:
        for key in (_landing(path, folder_realpath), _real(path), _identity(path)):
            if key is not None:
                read_by.setdefault(key, f"{path}, which {option} reads")
    writers: dict[str, Source] = {}
    # outputs by their names with letter case and Unicode normalisation folded: (output, source)
    alike: dict[str, tuple[str, Source]] = {}
    told_apart_by_case: list[tuple[str, Source, str, Source]] = []
    read_at = None
    if options.skip_existing:
        read_at = max((when for when in (_modified(path) for _, path in files_read) if when is not None), default=None)
        if stdin_read:
            read_at = time.time_ns()
    jobs = []
    for index, source in enumerate(sources):
        if source.error is not None:
            # a broken link or a loop a folder or glob found names its planned output, as a
            # missing file named does; a folder that could not be listed has none
            jobs.append(Job(index, source.path, _failed_output(options, fields, source, index), "", source.error))
            continue
        try:
            output = _output_name(options, fields, source, index)
        except PlanError:
            if not _missing(source.path):
                raise
            # a folder that is not there ('gone/'): no name to render, and its own failure
            jobs.append(Job(index, source.path, "", "", _not_there(source.path)))
            continue
        key = _landing(output, folder_realpath)
        if key in writers:
            raise PlanError(f"{writers[key].path} and {source.path} would both be written to {output}; "
                            f"put {_telling_apart(writers[key], source, fields)} in --name")
        replaced = inputs.get(key) or inputs.get(_identity(output) or key)
        if replaced is not None:
            raise PlanError(f"{_replacing(output, source.path, replaced)}; a batch never writes over its inputs: "
                            "choose another --out-dir or --name")
        option_file = read_by.get(key) or read_by.get(_identity(output) or key)
        if option_file is not None:
            raise PlanError(f"{output}, the output of {source.path}, would replace {option_file}; a batch never "
                            "writes over its inputs: choose another --out-dir or --name")
        if not remote and io.is_stream(output):  # in a folder of files, a planted FIFO would hang the run
            raise PlanError(f"{output} is a device, FIFO or socket, or a link to one; "
                            "--out-dir writes files only: remove it or choose another --name")
        writers[key] = source
        first = alike.setdefault(_folded(key), (output, source))
        if first[1] is not source:
            told_apart_by_case.append((*first, output, source))
        try:
            fmt = _format(output, common, options.name)
        except PlanError:
            if not _missing(source.path):
                raise
            # an input that is not there: its own failure, as for a name whose output has a format
            jobs.append(Job(index, source.path, "", "", _not_there(source.path)))
            continue
        jobs.append(Job(index, source.path, output, fmt, size=source.size, options_read_at=read_at))
    if told_apart_by_case:
        _alike_outputs(told_apart_by_case, options.out_dir, remote, common.quiet)
    if remote:
        if options.skip_existing or options.no_clobber:
            _listing(options.out_dir, True)  # one listing tells every output's modified time (skip_reason)
    else:
        _check_inside(jobs, options.out_dir)
    return jobs


def _output_name(options: BatchOptions, fields: set[str], source: Source, index: int) -> str:
    """The output ``source`` is planned to, under --out-dir (a PlanError for a name --name cannot render)."""
    from geomcli.io import _remote

    parts = render(options.name, source, index)
    if "parent" not in fields and source.parent:
        parts = source.parent.split(os.sep) + parts
    if _remote.is_url(options.out_dir):
        return "/".join([options.out_dir.rstrip("/"), *parts])
    return os.path.join(options.out_dir, *parts)


def _failed_output(options: BatchOptions, fields: set[str], source: Source, index: int) -> str:
    """The planned output of a source that failed as it was found: a broken link's or a loop's,
    named as a missing file's is (--json's "output"); none ("") for a folder that could not be
    listed, or a name --name cannot render."""
    if not os.path.islink(source.path):
        return ""
    try:
        return _output_name(options, fields, source, index)
    except PlanError:
        return ""


def _folded(name: str) -> str:
    """``name`` as a file system that tells no letter case nor Unicode normalisation apart takes
    it (macOS's: café in NFC and in NFD, A.png and a.png, are one file)."""
    import unicodedata

    return unicodedata.normalize("NFD", name).lower()


def _alike_outputs(pairs: Sequence[tuple[str, Source, str, Source]], out_dir: str, remote: bool,
                   quiet: bool) -> None:
    """Outputs whose names differ only by letter case or Unicode normalisation: a usage error
    where --out-dir's file system is seen to take them for one file (the second would replace the
    first), else a warning, since a copy to such a one (macOS, Windows, their shares) would. git
    and rsync write both and say nothing until they collide."""
    import unicodedata

    first, first_source, output, source = pairs[0]
    if unicodedata.normalize("NFD", first) == unicodedata.normalize("NFD", output):
        how = "Unicode normalisation (NFC and NFD: they look alike)"
    else:
        how = "letter case" if first.lower() == output.lower() else "letter case and Unicode normalisation"
    told = (f"{first} and {output}, the outputs of {first_source.path} and {source.path}, differ only by {how}"
            + (f" (and {len(pairs) - 1} more pairs so)" if len(pairs) > 1 else ""))
    if not remote and _folds_case(out_dir):
        raise PlanError(f"{told}, and {out_dir} is on a file system that takes them for one file; put {{index}} in "
                        "--name")
    if not quiet:
        echo_stderr(f"Warning: {told}: both are written, but on a file system that does not tell them apart "
                    "(macOS, Windows, their shares) one replaces the other")


def _folds_case(folder: str) -> bool:
    """Whether the file system ``folder`` is on (its nearest parent's, where it is not there yet)
    takes two names that differ only by letter case for one file: its name, or the nearest
    parent's with a letter in it, looked up in the other case (git probes core.ignorecase alike,
    with a file it makes; a plan makes nothing)."""
    path = os.path.abspath(folder)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    while os.path.basename(path):
        other = os.path.join(os.path.dirname(path), os.path.basename(path).swapcase())
        if other != path:
            try:
                # the entries, not what they reach: a link in the other case (DATA -> data) is a
                # file of its own where case is told apart
                return os.path.samestat(os.lstat(path), os.lstat(other))
            except OSError:  # no such name in the other case
                return False
        path = os.path.dirname(path)
    return False


def passed_over_text(paths: Sequence[str], named: int = 3) -> str:
    """What a warning says of the files folders and globs held that no reader takes by name (in
    name order): that a photo folder's .heic files were not done, where the run's counts alone
    would not tell it.

    >>> passed_over_text(["a/x.txt"])
    'left out a/x.txt: geomcli reads no such file (.png, .jpg, .bmp, .gif, .webp, .npy, .tiff, .zarr)'
    >>> passed_over_text(["1.heic", "2.heic", "3.heic", "4.txt"], named=2).partition(":")[0]
    'left out 4 files, 1.heic, 2.heic and 2 more'
    """
    paths = sorted(paths)
    shown = ", ".join(paths[:named]) + (f" and {len(paths) - named} more" if len(paths) > named else "")
    what = shown if len(paths) == 1 else f"{len(paths)} files, {shown}"
    return f"left out {what}: geomcli reads no such file {READ_SUFFIXES}"


def folders_left_text(paths: Sequence[str], named: int = 3) -> str:
    """What a warning says of the subfolders a folder named without -r held: their files were not
    done, where the run's counts alone would not tell it (a forgotten -r).

    >>> folders_left_text(["shots/day"])
    'left out the folder shots/day: give -r to take subfolders too'
    >>> folders_left_text(["a/1", "a/2", "a/3", "a/4"], named=2)
    'left out 4 folders, a/1, a/2 and 2 more: give -r to take subfolders too'
    """
    paths = sorted(paths)
    shown = ", ".join(paths[:named]) + (f" and {len(paths) - named} more" if len(paths) > named else "")
    what = f"the folder {shown}" if len(paths) == 1 else f"{len(paths)} folders, {shown}"
    return f"left out {what}: give -r to take subfolders too"


def _replacing(output: str, source: str, replaced: str) -> str:
    """How an output that would replace an input is told, naming each file once.

    >>> _replacing("o/a.png", "o/a.png", "o/a.png")
    'o/a.png would replace the input it is made from'
    >>> _replacing("o/1.png", "a.png", "o/1.png")
    'o/1.png, the output of a.png, would replace the input of that name'
    """
    identity = _identity(source)
    if _real(replaced) == _real(source) or (identity is not None and identity == _identity(replaced)):  # a hard link
        return f"{output} would replace the input it is made from" + ("" if output == replaced else f", {replaced}")
    return f"{output}, the output of {source}, would replace the input " + (
        "of that name" if output == replaced else replaced)


def local_paths(options: BatchOptions) -> BatchOptions:
    """``options`` with a file:// --out-dir or --files-from as the local path it names."""
    import dataclasses

    from geomcli.io import _remote

    try:
        return dataclasses.replace(options, out_dir=_remote.local_path(options.out_dir),
                                   files_from=None if options.files_from is None
                                   else _remote.local_path(options.files_from))
    except GeomError as error:
        raise PlanError(str(error)) from error


# the most a --files-from list may hold: a million names of 256 bytes (/dev/zero is no list)
LIST_BYTES = 1 << 28


def read_list(path: str) -> list[str]:
    """The inputs ``--files-from`` lists, one a line (``-``: read from stdin), or NUL-separated
    where it holds a NUL (``find -print0``); blank lines and a UTF-8 byte order mark skipped, UTF-16
    or UTF-32 text refused. A name is taken as it is written (no glob), a name that is no UTF-8 as
    its bytes; ``-`` is refused, as no file's name."""
    import sys

    from geomcli import io
    from geomcli.io import _remote

    try:
        path = _remote.local_path(path)
        if _remote.is_url(path):
            text = _remote.read_bytes(path, LIST_BYTES, ", more than a list of names may hold")
        elif path == "-" and sys.stdin is None:
            raise PlanError("- (stdin) is closed: there is no list to read", options="--files-from")
        else:
            text = io.read_list_bytes(path, LIST_BYTES)
    except GeomError as error:
        raise PlanError(f"cannot read the list: {error}", options="--files-from") from error
    found = io.sniff_format(text[:16])
    if found is not None:  # (its bytes split at NULs read as names: a 3 KB line of escapes)
        raise PlanError(f"{path} is a {found.upper()} file, not a list of names, one a line", options="--files-from")
    wide = _wide_text(text[:4])
    if wide is not None:  # split at its NULs, every character was a name: "." the current folder
        raise PlanError(f"{path} is {wide} text: save the list as UTF-8, one name a line", options="--files-from")
    text = text.removeprefix(b"\xef\xbb\xbf")  # Notepad's UTF-8 byte order mark, not the first name's
    if b"\0" in text:  # no name holds a NUL: the list is find -print0's, whose names may hold newlines
        names = [name for name in os.fsdecode(text).split("\0") if name]
    else:
        lines = os.fsdecode(text).split("\n") if text else []
        names = [line.removesuffix("\r") for line in lines if line.removesuffix("\r")]
    if "-" in names:  # not stdin, which is read as INPUT - (and the list may be stdin itself)
        raise PlanError("- in a --files-from list names no file; give - as an INPUT to read stdin",
                        options="--files-from")
    return names


def _wide_text(head: bytes) -> str | None:
    """The encoding a byte order mark names where it is UTF-16 or UTF-32 (PowerShell 5 writes
    UTF-16 with ``>``), else None.

    >>> _wide_text(b"\\xff\\xfea\\x00"), _wide_text(b"\\x00\\x00\\xfe\\xff"), _wide_text(b"a.pn")
    ('UTF-16', 'UTF-32', None)
    """
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16"
    return None


def expand(arguments: Sequence[str], recursive: bool, listed: Sequence[str] = (), *,
           out_dir: str | None = None, passed_over: list[str] | None = None,
           folders_left: list[str] | None = None, listing: Listing | None = None) -> list[Source]:
    """Files, folders (their readable files; -r: and their subfolders') and globs, in order; then
    the ``listed`` names (--files-from), files or folders but never patterns.

    A glob is expanded here, ``**`` included, so a huge folder never meets the shell's argument
    limit. Hidden files are left out of folders and globs; a file named twice is taken once.
    ``out_dir`` (--out-dir), where a folder or glob walks into it below the folder it starts from,
    is left out with all it holds: an earlier run's outputs are not this run's inputs. A folder or
    file named itself is still taken. The files of folders and globs that no reader takes by their
    names (a .txt, a .heic) are left out and added to ``passed_over``, for a warning, and without
    ``recursive`` a named folder's subfolders (not hidden, not zarr arrays, not ``out_dir``) to
    ``folders_left``. ``listing`` counts the inputs as they are found, and is marked finished.
    """
    from geomcli.io import _remote

    skip = _OutDir(out_dir)
    listing = Listing() if listing is None else listing
    passed_over = [] if passed_over is None else passed_over
    folders_left = [] if folders_left is None else folders_left
    sources: list[Source] = []
    seen: set[str] = set()
    asked = _named_together([name for name in listed if _remote.is_url(name) and not _zarr.is_zarr(name)])
    for argument, literal in [*((argument, False) for argument in arguments), *((name, True) for name in listed)]:
        if argument == "-":
            raise PlanError("- (stdin) is one input: give -o OUTPUT, not --out-dir")
        skip.met = False
        left = len(folders_left)
        try:
            argument = _remote.local_path(argument)
        except GeomError as error:
            raise PlanError(str(error)) from error
        if _zarr.is_zarr(argument) and (literal or not _GLOB_MAGIC.search(argument) or os.path.lexists(argument)):
            # a zarr array is one input, folder or not
            found, what = [Source(argument.rstrip("/"), "")], argument
        elif _remote.is_url(argument):
            found, what = _url_sources(argument, recursive, literal, skip, passed_over,
                                       asked.get(argument, _UNASKED) if literal else _UNASKED, folders_left)
        elif os.path.isdir(argument):
            found, what = (_folder(argument, recursive, skip, passed_over, folders_left, listing),
                           f"the folder {argument}")
        elif literal or os.path.lexists(argument) or not _GLOB_MAGIC.search(argument):
            found, what = [Source(argument, "")], argument
        else:
            found, what = (_glob(argument, skip, passed_over, recursive, folders_left, listing),
                           f"the pattern {argument!r}")
        misnamed = None if found or _remote.is_url(argument) else _zarr.misnamed(argument)
        if misnamed is not None:
            raise PlanError(misnamed)
        if not found:
            raise PlanError(f"{what} has no file geomcli reads {READ_SUFFIXES}"
                            + (f" outside --out-dir {out_dir}, which it leaves out" if skip.met else "")
                            + ("; give -r to take its subfolders too" if len(folders_left) > left else ""))
        for source in found:
            key = input_key(source.path)
            if key not in seen:
                seen.add(key)
                sources.append(source)
        listing.found = len(sources)  # (a file two arguments named, counted twice by their walks, once)
    # a file two arguments pass over (a folder and its glob, a/ and ./a/) is named once, as it is taken once
    once: dict[str, str] = {}
    for path in passed_over:
        once.setdefault(input_key(path), path)
    passed_over[:] = once.values()
    once.clear()
    for path in folders_left:
        once.setdefault(input_key(path), path)
    folders_left[:] = once.values()
    listing.finished = True
    return sources


def is_pattern(name: str) -> bool:
    """Whether ``name`` is a glob a batch expands (a file or object so named is taken as it is; an
    http(s):// URL's ? starts its query)."""
    from geomcli.io import _remote

    if not _remote.is_url(name):
        return bool(_GLOB_MAGIC.search(name)) and not os.path.lexists(name)
    if _remote.protocol(name) in _remote.READ_ONLY or not _GLOB_MAGIC.search(name.split("://", 1)[1]):
        return False
    try:
        return _remote.modified(name) is None  # no object so named
    except GeomError:
        return False  # a store that cannot be asked: the read says why


def input_key(path: str) -> str:
    """What names one input however it is spelled (./a.png, a.png): a file named twice is done once.
    Links to one file are each an input."""
    from geomcli.io import _remote

    return path if _remote.is_url(path) else os.path.normcase(os.path.abspath(path))


class _OutDir:
    """The --out-dir a walk leaves out: a local folder by its device and inode (however it is
    spelled: relative, with a trailing slash, through a link), a URL by its one spelling."""

    def __init__(self, out_dir: str | None) -> None:
        from geomcli.io import _remote

        self.url: str | None = None
        self.identity: tuple[int, int] | None = None
        self.met = False  # whether a walk has left it out
        if out_dir is None:
            return
        if _remote.is_url(out_dir):
            try:
                self.url = _remote.canonical(out_dir).rstrip("/") + "/"
            except GeomError:
                pass  # a URL no filesystem takes: the plan says so
        elif os.path.isdir(out_dir):  # none yet: nothing of it to leave out
            self.identity = _identity(out_dir)

    def holds(self, folder: str) -> bool:
        """Whether the local ``folder`` is the --out-dir."""
        held = self.identity is not None and _identity(folder) == self.identity
        self.met = self.met or held
        return held

    def holds_url(self, relative: str, below: str | None) -> bool:
        """Whether ``relative``, a path below a folder URL, is in the --out-dir, ``below`` it
        (:meth:`below`)."""
        held = below is not None and (relative + "/").startswith(below)
        self.met = self.met or held
        return held

    def below(self, root: str) -> str | None:
        """The --out-dir's path below the folder URL ``root`` and a slash, None where it is not
        below it (``root`` itself was named: it is not left out)."""
        from geomcli.io import _remote

        if self.url is None:
            return None
        base = _remote.canonical(root).rstrip("/") + "/"
        return self.url[len(base):] if self.url.startswith(base) and self.url != base else None


def _folder(root: str, recursive: bool, skip: _OutDir | None = None, passed_over: list[str] | None = None,
            folders_left: list[str] | None = None, listing: Listing | None = None) -> list[Source]:
    """The readable files of ``root`` (-r: and of its subfolders, links to folders not followed,
    ``skip`` left out), and a failing Source for each folder that could not be listed; its other
    files added to ``passed_over``, and without -r its subfolders to ``folders_left``; each file
    found counted in ``listing``."""
    found = []
    skip = skip or _OutDir(None)
    listing = Listing() if listing is None else listing

    def unlisted(error: OSError) -> None:
        found.append(_unlisted(error.filename, root, error))

    for folder, subfolders, names in os.walk(root, onerror=unlisted):
        subfolders[:] = [name for name in subfolders if not skip.holds(os.path.join(folder, name))]
        arrays = [name for name in subfolders if not name.startswith(".") and _zarr.is_zarr(name)]
        found.extend(Source(os.path.join(folder, name), _parent(os.path.join(folder, name), root)) for name in arrays)
        subfolders[:] = [name for name in subfolders if not name.startswith(".") and name not in arrays]
        if not recursive:
            if folders_left is not None:
                folders_left.extend(os.path.join(folder, name) for name in subfolders)
            subfolders[:] = []
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith("."):  # (names holds no folder: a FIFO or device is an input that fails, as by name)
                continue
            if _readable(name):
                found.append(_file_source(path, root))
                listing.found += 1
            elif passed_over is not None:
                passed_over.append(path)
    return _in_order(found, root)


def _glob(pattern: str, skip: _OutDir | None = None, passed_over: list[str] | None = None, recursive: bool = False,
          folders_left: list[str] | None = None, listing: Listing | None = None) -> list[Source]:
    """The readable files a pattern matches, as glob.glob(recursive=True) finds them, but for
    ``**``, which never follows a link to a folder (a link to ``.`` would repeat the tree without
    end), and for ``skip``, left out below the pattern's fixed folder; and a failing Source for each
    folder that could not be listed. The files it matches that are not readable are added to
    ``passed_over``. A folder it matches is taken as that folder named (:func:`_folder`: -r walks
    it, else its subfolders go to ``folders_left``), as the shell's expansion would pass it; not
    under ``**``, which walks the folders itself. Each file found is counted in ``listing``."""
    skip = skip or _OutDir(None)
    listing = Listing() if listing is None else listing
    if pattern.endswith("/"):  # folders only: no file
        return []
    parts = pattern.split("/")
    fixed = []
    for part in parts[:-1]:
        if _GLOB_MAGIC.search(part):
            break
        fixed.append(part)
    root = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    named = [part for part in parts if part]
    fixed_count = len([part for part in fixed if part])  # names of folders the pattern itself names
    found: list[Source] = []

    def entries(folder: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(folder or ".") as listing:
                return list(listing)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as error:
            found.append(_unlisted(folder, root, error))
            return []

    def matches(folder: str, rest: list[str]) -> Iterator[str]:
        head, tail = rest[0], rest[1:]
        if head == "**":  # any depth, this folder's included
            yield from matches(folder, tail) if tail else ()
            for entry in entries(folder):
                if not entry.name.startswith("."):
                    path = os.path.join(folder, entry.name)
                    if entry.is_dir(follow_symlinks=False) and not _zarr.is_zarr(entry.name):
                        yield from () if skip.holds(path) else matches(path, rest)
                    elif not tail:
                        yield path
            return
        if _GLOB_MAGIC.search(head):
            names = [entry.name for entry in entries(folder)
                     if fnmatch.fnmatch(entry.name, head) and (head.startswith(".") or not entry.name.startswith("."))]
        else:
            names = [head]
        for name in names:
            path = os.path.join(folder, name)
            if tail:
                walked = len(named) - len(tail) > fixed_count  # met by a pattern, not named
                yield from matches(path, tail) if os.path.isdir(path) and not (walked and skip.holds(path)) else ()
            elif os.path.lexists(path):
                yield path

    for path in matches("/" if pattern.startswith("/") else "", named):
        array = _zarr.is_zarr(path) and os.path.isdir(path) and not skip.holds(path)
        is_file = not os.path.isdir(path)  # a FIFO or device too: an input that fails, as given by name
        if (_readable(path) and is_file) or array:
            found.append(_file_source(path, root))
            listing.found += 1
        elif is_file and passed_over is not None:
            passed_over.append(path)
        elif not is_file and "**" not in named and not os.path.basename(path).startswith(".") \
                and not skip.holds(path):
            found.extend(_folder(path, recursive, skip, passed_over, folders_left, listing))
    return _in_order(found, root)


def _broken_link(path: str) -> bool:
    return os.path.islink(path) and not os.path.exists(path)


def _file_source(path: str, root: str) -> Source:
    """A file a folder or glob found; a broken link among them is that input's failure, as the
    shell's own glob would give it, not left out of the run unsaid."""
    if _broken_link(path):  # (or a loop of links: its read's line says which)
        return Source(path, _parent(path, root), _not_there(path))
    return Source(path, _parent(path, root))


# what _url_sources asks of the store itself: a name not asked before
_UNASKED = object()


def _url_sources(url: str, recursive: bool, literal: bool, skip: _OutDir | None = None,
                 passed_over: list[str] | None = None, asked: Any = _UNASKED,
                 folders_left: list[str] | None = None) -> tuple[list[Source], str]:
    """What a URL argument names, as for a local one: the readable files a glob matches (``**``
    any depth; hidden names only where the pattern names them; a folder it matches taken as that
    folder named, as _glob takes one), a folder's (:func:`_url_folder`), or the one file, those in
    ``skip`` below where the listing starts left out (the unreadable added to ``passed_over``); and
    how a message names it. Sizes come from the listing, or from what the store said of the name
    already (``asked``: :func:`_named_together`)."""
    from geomcli.io import _remote

    skip = skip or _OutDir(None)
    _filesystem(url)  # a URL no filesystem takes (no bucket, its package missing) is a usage fault
    protocol, rest = url.split("://", 1)
    parts = rest.split("/")
    root = url
    try:
        if not literal and _GLOB_MAGIC.search(rest) and _remote.protocol(url) not in _remote.READ_ONLY:
            if url.endswith("/"):  # folders only: no file, as a local pattern's (_glob), not its files
                return [], f"the pattern {url!r}"
            fixed = []
            for part in parts[:-1]:
                if _GLOB_MAGIC.search(part):
                    break
                fixed.append(part)
            root = f"{protocol}://" + "/".join(fixed)
            pattern = [part for part in parts[len(fixed):] if part]
            depth = None if "**" in pattern else len(pattern)
            left_out = skip.below(root)
            subfolders: list[str] = []  # (of root, where its own listing has them: a pattern of one name)
            entries = _remote.listing(root, depth is None or depth > 1, subfolders)
            found = [(entry, relative) for entry in entries
                     if (relative := _relative(entry.url, root)) and _glob_match(pattern, relative.split("/"))
                     and (depth is None or relative.count("/") < depth)
                     and not skip.holds_url(relative, left_out)]
            # a prefix the pattern matches is a folder (not under **, which walks folders itself)
            prefixes = {"/".join(names[:depth]) for entry in entries
                        if depth is not None and len(names := _relative(entry.url, root).split("/")) > depth}
            prefixes.update(_relative(folder, root) for folder in subfolders)
            folders = sorted(prefix for prefix in prefixes if _glob_match(pattern, prefix.split("/"))
                             and not prefix.rpartition("/")[2].startswith(".") and not skip.holds_url(prefix, left_out))
            sources = _url_order(found, root, passed_over)
            # with -r, a folder's files are in the listing of every depth made above: not listed again
            within: dict[str, list[Entry]] | None = None
            if recursive and depth is not None and depth > 1:
                within = {folder: [] for folder in folders}
                for entry in entries:
                    prefix = "/".join(_relative(entry.url, root).split("/")[:depth])
                    if prefix in within:
                        within[prefix].append(entry)
            for folder in folders:
                try:
                    sources.extend(_url_folder(f"{root}/{folder}", recursive, skip, passed_over, folders_left,
                                               None if within is None else within[folder]))
                except GeomError as error:  # one failure, as a local folder that cannot be listed
                    sources.append(Source(f"{root}/{folder}", "", str(error)))
            sources.sort(key=lambda source: _relative(source.path, root).split("/"))
            return sources, f"the pattern {url!r}"
        if isinstance(asked, BaseException):
            raise asked
        named = _remote.named(url) if asked is _UNASKED else asked
        if named is None:  # a folder
            root = url.rstrip("/")
            return _url_folder(root, recursive, skip, passed_over, folders_left), f"the folder {url}"
    except GeomError as error:
        # as a local folder that cannot be listed: one failure of the run (a store that does not
        # answer, credentials refused), not a pattern that matched nothing
        return [Source(root, "", str(error))], url
    return [Source(url, "", size=named.size)], url


def _url_folder(root: str, recursive: bool, skip: _OutDir, passed_over: list[str] | None = None,
                folders_left: list[str] | None = None, listed: Sequence[Entry] | None = None) -> list[Source]:
    """The readable files of the folder URL ``root``, as :func:`_folder` finds a local folder's:
    -r at every depth, hidden names and ``skip`` left out, its other files added to
    ``passed_over``, and without -r its subfolders to ``folders_left``. ``listed``: with -r, its
    entries at every depth, from a listing made already (a glob's), else it is listed here."""
    from geomcli.io import _remote

    left_out = skip.below(root)
    subfolders: list[str] = []
    found = []
    for entry in _remote.listing(root, recursive, subfolders) if listed is None else listed:
        relative = _relative(entry.url, root)
        if relative and not any(name.startswith(".") for name in relative.split("/")) \
                and not skip.holds_url(relative, left_out):
            found.append((entry, relative))
    if folders_left is not None:
        folders_left.extend(folder for folder in subfolders if not (relative := _relative(folder, root)).startswith(".")
                            and relative and not skip.holds_url(relative, left_out))
    return _url_order(found, root, passed_over)


def _named_together(urls: Sequence[str]) -> dict[str, Any]:
    """What the store says of each object named alone (a --files-from line): its entry, None for
    a folder (geomcli.io._remote.named), or what asking raised, to be raised where the name is
    taken. Asked REMOTE_HEADER_THREADS at a time, as headers are: one after another, 2,505 names
    took 43 s of a local S3 server, and a real store's round trips are longer."""
    from geomcli.io import _remote

    urls = list(dict.fromkeys(urls))
    if len(urls) < 2:
        return {}
    for url in urls:
        _filesystem(url)  # a usage fault before any request

    def ask(url: str) -> Any:
        try:
            return _remote.named(url)
        except Exception as error:  # (raised in order, where the name is taken, as when asked there)
            return error

    return dict(zip(urls, _side_by_side(ask, urls, "geomcli-named"), strict=True))


def _filesystem(url: str) -> None:
    from geomcli.io import _remote

    try:
        _remote.filesystem(url)
    except GeomError as error:
        raise PlanError(str(error)) from error


def _listing(url: str, recursive: bool) -> list[Any]:
    from geomcli.io import _remote

    try:
        return _remote.listing(url, recursive)
    except GeomError as error:
        raise PlanError(str(error)) from error


def _relative(url: str, root: str) -> str:
    """``url``'s path below the folder ``root`` ("" for none), both as a listing spells them."""
    from geomcli.io import _remote

    base = _remote.canonical(root).rstrip("/") + "/"
    return url[len(base):] if url.startswith(base) else ""


def _url_order(found: list[tuple[Any, str]], root: str, passed_over: list[str] | None = None) -> list[Source]:
    """The readable of ``found`` as Sources, in the order of their path below ``root``, name by
    name, as local folders are; the others' URLs added to ``passed_over``."""
    found.sort(key=lambda item: item[1].split("/"))
    readable = [_url_readable(relative.rpartition("/")[2]) for _, relative in found]
    if passed_over is not None:
        passed_over.extend(entry.url for (entry, _), taken in zip(found, readable, strict=True) if not taken)
    return [Source(entry.url, relative.rpartition("/")[0], size=entry.size)
            for (entry, relative), taken in zip(found, readable, strict=True) if taken]


def _url_readable(name: str) -> bool:
    """Whether a listing's entry is an input: a file geomcli reads, or a zarr array (which a
    listing gives as one entry)."""
    return _zarr.is_zarr(name) or _readable(name)


def _glob_match(pattern: list[str], names: list[str]) -> bool:
    """Whether the names of a path match the pattern's, as _glob matches them: ``**`` any number of
    names (none hidden), a hidden name only where the pattern's starts with a dot.

    >>> _glob_match(["**", "*.png"], ["a", "b", "c.png"]), _glob_match(["*.png"], [".c.png"])
    (True, False)
    """
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        for count in range(len(names) + 1):
            if _glob_match(rest, names[count:]):
                return True
            if count < len(names) and names[count].startswith("."):
                return False
        return False
    if not names or not fnmatch.fnmatchcase(names[0], head):
        return False
    if names[0].startswith(".") and not head.startswith("."):
        return False
    return _glob_match(rest, names[1:])


def _parent(path: str, root: str) -> str:
    parent = os.path.relpath(os.path.dirname(path) or ".", root)
    return "" if parent == "." else parent


def _unlisted(folder: str, root: str, error: OSError) -> Source:
    return Source(folder, _parent(folder, root), f"{folder}: cannot list the folder ({error.strerror or error})")


def _in_order(found: list[Source], root: str) -> list[Source]:
    return sorted(found, key=lambda source: os.path.relpath(source.path, root).split(os.sep))


def _readable(name: str) -> bool:
    from geomcli import io

    try:
        io.format_for_path(name)
    except GeomError:
        return False
    return True


def check_template(template: str) -> set[str]:
    """The fields --name uses; usage errors for unknown fields and absolute templates."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise PlanError(f"{template!r}: {error}", options="--name") from error
    fields = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in FIELDS or conversion or "{" in (spec or ""):
            # the field as written: {stem!r} named a known {stem} unknown
            written = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise PlanError(f"{template!r}: unknown field {{{written}}}; use "
                            + " ".join(f"{{{known}}}" for known in FIELDS), options="--name")
        if any(int(number) > NAME_MAX for number in re.findall(r"\d+", spec or "")):
            # caught before a name of that width is made: {index:0500000000d} would take gigabytes
            raise PlanError(f"{template!r}: {{{name}:{spec}}} is wider than a file name can be "
                            f"({NAME_MAX} bytes)", options="--name")
        fields.add(name)
    if os.path.isabs(template):
        raise PlanError(f"{template!r} is an absolute path; names are relative to --out-dir", options="--name")
    return fields


def _telling_apart(first: Source, second: Source, fields: set[str]) -> str:
    """The --name fields that give two inputs bound for one output names of their own: the part of
    their names that differs, where the template leaves it out, and {index}. Not {parent}: it is
    already in every output's path, and where it is alike, as for two files named alone from two
    folders, it cannot tell them apart (the hint was {parent} for them, which changed nothing).

    >>> _telling_apart(Source("a/x.jpg", ""), Source("a/x.JPG", ""), {"stem"})
    '{suffix} or {index}'
    >>> _telling_apart(Source("a/x.jpg", ""), Source("b/x.jpg", ""), {"parent", "stem", "suffix"})
    '{index}'
    """
    if "name" in fields:
        return "{index}"
    names = [_split_name(os.path.basename(source.path)) for source in (first, second)]
    differing = [field for field, (one, other) in zip(("stem", "suffix"), zip(*names), strict=True)
                 if one != other and field not in fields]
    return " or ".join(f"{{{field}}}" for field in [*differing, "index"])


# double extensions that name one format: {stem} of x.ome.tif is x (its {suffix} .ome.tif), as
# tifffile, Bio-Formats and NGFF read such a name; '{stem}.ome.tif' wrote x.ome.ome.tif
_DOUBLE_SUFFIXES = (".ome.tiff", ".ome.tif", ".ome.zarr")


def _split_name(name: str) -> tuple[str, str]:
    """A file name as --name's {stem} and {suffix}: os.path.splitext's, but for an OME name's
    double extension, which is its suffix whole.

    >>> _split_name("x.ome.tif"), _split_name("cells.OME.zarr"), _split_name("a.b.png"), _split_name(".ome.tif")
    (('x', '.ome.tif'), ('cells', '.OME.zarr'), ('a.b', '.png'), ('.ome', '.tif'))
    """
    for suffix in _DOUBLE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], name[-len(suffix):]
    return os.path.splitext(name)


def render(template: str, source: Source, index: int) -> list[str]:
    """The output path under --out-dir as a list of names; ``..`` and empty names are refused.

    >>> render("{parent}/{index:03d}_{stem}.npy", Source("shots/a/b.png", "a"), 7)
    ['a', '007_b.npy']
    >>> render("{stem}{suffix}", Source("b.png", ""), 0)
    ['b.png']
    """
    name = os.path.basename(source.path)
    stem, suffix = _split_name(name)
    try:
        text = template.format(stem=stem, suffix=suffix, name=name, parent=source.parent, index=index)
    except (ValueError, TypeError, OverflowError) as error:  # {index:c} past U+10FFFF overflows
        raise PlanError(f"{template!r}: {error}", options="--name") from error
    if "\0" in text:  # {index:c} of index 0; the file system would refuse it with a ValueError
        raise PlanError(f"{template!r} names {text!r} for {source.path}; a file name cannot hold a NUL",
                        options="--name")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PlanError(f"{template!r} names {text!r} for {source.path}, outside --out-dir", options="--name")
    if not parts:
        raise PlanError(f"{template!r} gives an empty name for {source.path}", options="--name")
    for part in parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise PlanError(f"{template!r} names {part[:40]!r}... for {source.path}, longer than a file "
                            f"name can be ({NAME_MAX} bytes)", options="--name")
    return parts


def _format(output: str, common: Common, template: str) -> str:
    """The output's format, or a usage error as for -o (cli._output_format)."""
    from geomcli import io

    try:
        found = output_format(output, common.format)
    except FormatConflictError as error:
        base = template.removesuffix("{suffix}")
        root, extension = os.path.splitext(base)
        base = root if extension and "}" not in extension else base
        raise PlanError(f"{error}, named by {template!r}; give --name '{base}.{common.format}' or drop "
                        "--format", options="--name") from error
    except GeomError as error:  # the name may be the default's, of an input of no extension: say so
        raise PlanError(f"{error}, named by --name {template!r}", options="--name") from error
    refusal = io.refused_option(write_options(common), found)
    if refusal is not None:
        raise PlanError(f"{refusal} ({output}, named by --name {template!r})")
    return found


def check_spared(output: str, files_read: Sequence[tuple[str, str]]) -> None:
    """A usage error where -o ``output`` would replace a file an option reads, (option, path) of
    ``files_read`` (a --grid, a --theta file, --like): -o may name its own INPUT, not these, which a
    batch never writes over either."""
    from geomcli import io

    read = [(option, path) for option, path in files_read if path != "-" and not io.is_stdin(path)]
    if io.is_stdout(output) or not read:
        return
    try:
        written = {_landing(output), _identity(output)} - {None}  # (no inode where nothing is there yet)
    except GeomError:
        return  # an output the run cannot write (gs:// without gcsfs) fails there, with its one line
    for option, path in read:
        try:
            spellings = {_landing(path), _real(path), _identity(path)} - {None}
        except GeomError:
            continue  # a file the run cannot read (gs:// without gcsfs) fails there, with its one line
        if written & spellings:
            raise PlanError(f"-o {output} would replace {path}, which {option} reads; write the result elsewhere")


def _check_inside(jobs: Sequence[Job], out_dir: str) -> None:
    """A symlinked folder under --out-dir must not lead outside it."""
    root = os.path.realpath(out_dir)
    checked: set[str] = set()
    for job in jobs:
        folder = os.path.dirname(job.output)
        if job.error is not None or folder in checked:
            continue
        checked.add(folder)
        real = os.path.realpath(folder)
        if os.path.commonpath([root, real]) != root:
            raise PlanError(f"{job.output} would be written to {real}, outside --out-dir {out_dir} "
                            "(through a symbolic link)")


def _real(path: str) -> str:
    """The file a path reads, through every link (a URL: its one spelling)."""
    from geomcli.io import _remote

    if _remote.is_url(path):
        return _remote.canonical(path)
    return os.path.normcase(os.path.realpath(path))


def _identity(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (through links), None where there is none."""
    from geomcli.io import _remote

    if _remote.is_url(path):
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _landing(path: str, realpath: Callable[[str], str] = os.path.realpath) -> str:
    """Where a file written to ``path`` lands: it replaces a link there, so only the folder's
    links are followed (by ``realpath``)."""
    from geomcli.io import _remote

    if _remote.is_url(path):
        return _remote.canonical(path)
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.normcase(os.path.join(realpath(folder), name))


def _not_there(path: str) -> str:
    """The failure of an input :func:`_missing` finds: a local one's as its read would say it
    ('a.png/' of a file a.png is no folder, not a missing file), a URL's 'no such file'."""
    from geomcli import io
    from geomcli.io import _remote

    return f"{path}: no such file" if _remote.is_url(path) else io.not_there(path)


def _missing(path: str) -> bool:
    """Whether an input named as a file is not there (a local path, a URL): its own failure, not
    the options' (an output name of no format, made from a name that names nothing)."""
    from geomcli.io import _remote

    if path == "-":
        return False
    if not _remote.is_url(path):
        return not os.path.lexists(path)
    try:
        return _remote.modified(path) is None
    except GeomError:  # no answer: the plan's own error stands
        return False


def skip_reason(job: Job, options: BatchOptions) -> str | None:
    if not (options.skip_existing or options.no_clobber):
        return None
    made = _modified(job.output)
    if made is None or (_zarr.is_zarr(job.output) and _zarr.incomplete(job.output)):
        return None  # none there, or an array a stopped run left incomplete: done again, replaced
    if options.no_clobber:
        return OUTPUT_EXISTS
    if _no_output(job.output):
        return None  # its write fails, with its line, as without --skip-existing
    changed = _modified(job.input)
    if changed is None:
        return None  # the read reports it
    # as make judges: an output not older than its input, nor than a --grid or --theta file, is up to date
    newest = changed if job.options_read_at is None else max(changed, job.options_read_at)
    return "the output is up to date (--skip-existing)" if made >= newest else None


def _no_output(path: str) -> bool:
    """Whether the folder at the local output ``path`` is no output a run made: any folder at a
    file's name, or one that is no zarr array at a .zarr name (a group's too, which the run
    replaces). --skip-existing took it for an output up to date (exit 0, '1 skipped', where the
    run without it failed that file, or wrote its array there)."""
    from geomcli.io import _remote

    if _remote.is_url(path) or not os.path.isdir(path):
        return False
    return not (_zarr.is_zarr(path) and _zarr.holds_array(path))


def _modified(path: str) -> int | None:
    """When the file at ``path`` was last changed (ns; for a URL as its listing says; a zarr
    array's newest file), None where there is none (or it cannot be told: the read or write says
    why)."""
    from geomcli.io import _remote

    try:
        if _remote.is_url(path):
            return _remote.modified(path)
        if _zarr.is_zarr(path) and os.path.isdir(path):
            return _newest(path)
        return os.stat(path).st_mtime_ns
    except (OSError, GeomError):
        return None


def _newest(folder: str) -> int:
    """The newest modified time under ``folder``, its own and its subfolders' included: a chunk
    written in place changes its file alone, one removed (all fill value) only its folder. A stat
    per file and folder (50,000 chunks: 0.12 s here, the inodes cached), asked only where the output exists."""
    newest = os.stat(folder).st_mtime_ns
    for parent, _, names in os.walk(folder, onerror=_raise):
        for name in ["", *names]:
            newest = max(newest, os.stat(os.path.join(parent, name)).st_mtime_ns)
    return newest


def _raise(error: OSError) -> None:
    raise error


def planned(task: Task, job: Job, options: BatchOptions, header: Header | None = None) -> Report:
    """What the run would do to ``job``, from its input's header alone (--dry-run): the output's
    shape and dtype, or the failure the header shows; nothing is written. ``header``: the one
    already read as the run reads it (:func:`header_as_read`), else it is read here."""
    from geomcli import io
    from geomcli.engine import layout as layouts
    from geomcli.engine import zarr_file
    from geomcli.io import _remote, _zarr

    report = summary.Report(task.operation.command, job.input, job.output or None,
                            parameters=task.operation.parameters())
    reason = skip_reason(job, options)
    # (the header's and the tasks' check's open; a URL's bytes read for its header, for its metadata)
    with reporting(report, task.common), _zarr.shared_opens(), _remote.shared_reads():
        if job.error is not None:
            raise GeomError(job.error)
        fidelity = task.common.fidelity
        if header is None:
            header = io.read_header(job.input, auto_orient=fidelity.auto_orient, series=fidelity.series,
                                    page=fidelity.page, frames=fidelity.frames, palette=fidelity.keep_palette)
        report.input_shape, report.input_dtype = list(header.shape), str(header.dtype)
        judged = judged_by(task.common, job.input, job.output)
        common = layouts.own_axes(judged, header.format)
        # the limits the run would apply: the input's here, the output's in output_shape
        io.check_size(header.shape, common.max_pixels, io.display_name(job.input))
        try:
            shape = planned_shape(task.operation, header, common)
        except GeomError as error:
            steps = task.operation.trace_known(header, common)  # a chain's steps up to the one refusing it
            if steps:
                report.steps = steps  # type: ignore[attr-defined]  # a key of chain's records only
            raise GeomError(f"{job.input}: {error}") from error
        layout = layouts.result_layout(task.operation.takes_rank_layout(), header.shape, header.layout, shape,
                                       job.output, job.format, common)
        report.output_shape = list(io.written_shape(shape, job.format, layout))  # as the run reports it
        report.output_dtype = str(header.dtype)
        report.parameters = task.operation.parameters(header.dtype)  # as the run would use them
        steps = task.operation.trace(header, common)
        if steps:
            report.steps = steps  # type: ignore[attr-defined]  # a key of chain's records only
        check_writable(header, shape, job.input, job.output, job.format, common)
        graph = zarr_file.check_tasks(task.operation, job.input, job.output, task.common)
        # what the run would warn of, in its order: the input's --layout and name, the options this
        # file's formats do not use, and the options seldom meant for this header (a resized channel axis)
        report.warnings.extend(summary.of_input(layouts.ignored_layout(judged, header.format, header.layout),
                                                io.mislabelled(job.input, header.format)))
        report.warnings.extend(unused_options(task.common.fidelity, header.format, job.format))
        report.warnings.extend(task.operation.unused_options())
        report.warnings.extend(task.operation.cautions(header, common))
        report.warnings.extend(unused_by_result(task.common.fidelity, job.format, report.output_shape))
        read_once = io.is_stdin(job.input) or (not _remote.is_url(job.input) and io.is_stream(job.input))
        metadata = io.read_metadata(job.input, auto_orient=fidelity.auto_orient, series=fidelity.series,
                                    page=fidelity.page, frames=fidelity.frames,
                                    palette=fidelity.keep_palette) if not read_once and graph is None else None
        if metadata is not None and zarr_file.involved(job.input, job.output):
            # a chunked job whose input is decoded whole (a PNG to a .zarr): its run says it as a chunked job's
            graph = zarr_file.whole_graph(task.operation, header, metadata, task.common)
        if graph is not None:  # a chunked job: what its run says of the input's metadata, by the run's code
            zarr_file.say_planned(task.operation, graph, job.output, job.format, report)
        elif metadata is not None:
            # a file or URL written whole: likewise, from its metadata read without its pixels
            planned_metadata(task.operation, metadata, header, shape, common, job.output, job.format, report)
        else:  # (a pipe's header alone is read: it is read once)
            unnamed = unnamed_warning(job.output, job.format, layout, len(shape), common)  # a .ome.tif of no OME axes
            report.warnings.extend([unnamed] if unnamed else [])
    if reason is not None:
        # the run would not read this file: whatever the header says, it is not a failure
        report.status, report.error = "skipped", None
        report.notes.append(reason)
    return report


def to_do(jobs: Sequence[Job], options: BatchOptions) -> list[Job]:
    """The jobs a run does: those the plan found no error in and --skip-existing or -n do not skip."""
    return [job for job in jobs if job.error is None and skip_reason(job, options) is None]


# Headers on object storage are read this many at a time (each is a request's round trip: 200
# on a local S3 server took 1 s one by one, and real latency is 5-10 times that), in runs of
# RUN_OF_HEADERS jobs, so that a million inputs are never a million futures at once.
REMOTE_HEADER_THREADS = 32
RUN_OF_HEADERS = 4096


def option_faults(task: Task, todo: Sequence[Job], unread: set[int] | None = None,
                  faulted: dict[int, Header] | None = None) -> list[tuple[Job, str]]:
    """What the headers of the inputs to do (:func:`to_do`) alone show they cannot take (a --fill
    their dtype cannot hold, a blocksize that does not divide them, a shape on more axes than they
    have, no layout, an output over --max-pixels or that its format cannot hold): each such job
    and its one line (:func:`header_fault`), found before anything is written; the index of each
    job whose header could not be read added to ``unread`` (a refused run names their failures
    without reading every header again), and the header of each job found at fault to ``faulted``
    by its index (a refused run's --json record of it is made from that header, not read again).
    Local headers are read one after another (parsing them holds the interpreter); URLs' side by side."""
    from geomcli.io import _remote, _zarr

    def fault(job: Job) -> str | None:
        # (a zarr's header and its tasks' check: one open; a URL's TIFF its ranges read whole, then
        # read whole where they read it as damaged: one read)
        with _zarr.shared_opens(), _remote.shared_reads():
            header = header_as_read(job.input, task.common)
            if header is None:
                if unread is not None:
                    unread.add(job.index)
                return None
            line = header_fault(task.operation, task.common, header, job.input, job.output, job.format)
            if line is not None and faulted is not None:
                faulted[job.index] = header  # (by_headers' threads: each sets its own key)
            return line

    return [(job, line) for job, line in zip(todo, by_headers(fault, todo)) if line is not None]


def by_headers(read: Callable[[Job], T], jobs: Sequence[Job]) -> Iterator[T]:
    """``read`` of each job in order, where ``read`` reads the job's header: local ones one after
    another (parsing them holds the interpreter), URLs' side by side, each taking the size its
    listing told (:func:`geomcli.io._remote.listed_size`)."""
    from geomcli.io import _remote

    if not any(_remote.is_url(job.input) for job in jobs):
        yield from map(read, jobs)
        return

    def read_sized(job: Job) -> T:
        # a Dask worker checking a big batch's headers has not listed them: asked, each size was a HEAD
        with _remote.listed_size(job.input, job.size):
            return read(job)

    yield from _side_by_side(read_sized, jobs, "geomcli-header")


def _side_by_side(ask: Callable[[U], T], items: Sequence[U], threads: str) -> Iterator[T]:
    """``ask`` of each item, in order, on threads named ``threads``, REMOTE_HEADER_THREADS at a
    time (each a store's round trip), in runs of RUN_OF_HEADERS: a million items are never a
    million futures at once."""
    from concurrent.futures import ThreadPoolExecutor

    from geomcli.io import _remote

    pool = ThreadPoolExecutor(REMOTE_HEADER_THREADS, thread_name_prefix=threads,
                              initializer=_remote.pool_initializer())
    try:
        for start in range(0, len(items), RUN_OF_HEADERS):
            yield from pool.map(ask, items[start:start + RUN_OF_HEADERS])
    finally:
        pool.shutdown(cancel_futures=True)  # a Ctrl-C waits for the requests under way, no more
