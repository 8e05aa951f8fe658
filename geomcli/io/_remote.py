"""Inputs and outputs named by URL (``s3://``, ``gs://``, ``az://``, ``https://`` to read), through
fsspec; ``file://`` is a local path and takes the local way.

An input is read whole into memory, then decoded as a stream's bytes are. An output is made in
memory, then placed whole: one request (``pipe_file``; on S3 a multipart upload of ours past
``MULTIPART_BYTES``, aborted on any failure, Ctrl-C and SIGTERM included), never
``fs.open(path, "wb")``, whose close commits a partial object after an exception. Under
io._atomic.no_replace (``-n``) the put is a conditional create (``If-None-Match: *`` on S3); under
deferred_commits it is the commit left to the caller.

Credentials and endpoints come from each filesystem's own configuration (for S3 the AWS_*
variables, AWS_ENDPOINT_URL included, or ~/.aws), plus the options :func:`configure` is given
(``--storage-option KEY=VALUE``), passed to every URL's filesystem.

A store that takes a connection and then says nothing (a stalled endpoint, a proxy that holds
requests) is waited on for botocore's timeouts at each try, and the tries are many: botocore's 5
of each request (its legacy retry mode), within s3fs's 5, and a GET's within 5 more. botocore
waits 60 s to connect and 60 s for each read, so a run met such a store for 26 minutes before a
file's HEAD failed (25 tries), 2 hours for a GET (125). geomcli gives S3 ``S3_TIMEOUTS``
instead, 10 s to connect and 15 s between two reads of an answer (a big object's body flowing
is never cut: the wait is for the next bytes, not the whole): a HEAD fails in about 7 minutes,
a GET in about half an hour, and a store that answers slowly costs a try more. The number of
tries is left as the user's AWS configuration (``AWS_MAX_ATTEMPTS``, ~/.aws) says: a number of
ours would override it. ``--storage-option 'config_kwargs={...}'`` is merged over these
timeouts, a key given there winning: ``config_kwargs={"read_timeout": 60}`` brings botocore's
back, and ``{"retries": {"max_attempts": 1}}`` leaves s3fs's tries alone (a GET's 125 become 50).

Those tries are bounded by a deadline of ours. Measured against a server that answers HEADs and
holds GETs, with both timeouts 0.2 s and ``max_attempts`` 1: a GET held 50 requests, 29 s; a zarr
chunk's read, made again by the store (_zarr_store.READ_RETRIES), 150 requests, 107 s: at 15 s a
request and botocore's 5 tries (125 GETs), half an hour for a file, an hour and a half for every
chunk of a zarr array. So each read of an object (a HEAD, a GET, a zarr chunk's get or put, its
store's own tries in), and each output's put, must be done within ``DEADLINE_SECONDS``, 60 s,
plus a second per ``SLOWEST_RATE`` (256 KiB) of the bytes it moves, else it fails at once, one
line saying the store stalled, and a batch sends it no more (no failure that may pass: it would
cost the deadline again; a read that stalled in the check of a header is not made again by its
run: take_failed). A healthy store
answers in milliseconds, and a passing failure costs s3fs's and botocore's pauses (a few seconds);
60 s still lets through a request or two held for the whole read timeout, and 256 KiB a second
(2 Mbit/s) a big body on a slow line. ``--storage-option deadline_seconds=N`` sets the 60 s
(``null``: no deadline, the tries alone); geomcli takes it, no filesystem is given it. Asking
whether a name is a folder (one listing request) has it too, and so has each page of a listing
(one request each, on S3): a big folder's listing may take minutes, but no page more than the
deadline. Not on GCS or Azure: fsspec bounds a listing only as a whole, which would fail a big
folder's healthy one, and gcsfs and adlfs read its pages inside one call of their own, with no
step between pages to wrap as s3fs's page loop is (_pages_in_time).

A store that answers nothing still cost every file its deadline, 32 at a time (10,000 names, 5
hours): within a batch (watching_stores), once ``STALLS_IN_A_ROW`` requests to one store in a row
have each waited out its deadline with nothing answered meanwhile (requests side by side that one
outage stalls are one), its other files fail at once, each in a line naming the store. A cluster's
tasks each count their own, so the client gives the tasks it sends the stores earlier tasks took
for dead (dead_stores, engine.cluster), else each task of the run waited out its own. A store
that answers again is not asked again in that run.

Only the standard library loads at import time; fsspec loads with the first URL.
"""

from __future__ import annotations

import errno
import io
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from geomcli.errors import GeomError, PlanError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

_URL = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")
INSTALL = "pip install 'geomcli[dask]'"
# the filesystems, by protocol, whose package an error names when it is missing
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs",
             "abfss": "adlfs", "http": "aiohttp", "https": "aiohttp"}
# protocols that only read
READ_ONLY = frozenset({"http", "https"})
# an output this big or bigger goes up in parts of this size (S3's smallest part is 5 MiB)
MULTIPART_BYTES = 50 << 20

# botocore's timeouts (seconds) for S3, where --storage-option's config_kwargs names none: see the docstring
S3_TIMEOUTS = {"connect_timeout": 10, "read_timeout": 15}
# the most seconds a read of an object may take, all its tries in, plus one per SLOWEST_RATE bytes
# it moves; and the --storage-option, geomcli's own, that sets the seconds: see the docstring
DEADLINE_SECONDS = 60.0
SLOWEST_RATE = 256 << 10
DEADLINE_OPTION = "deadline_seconds"
_options: dict[str, Any] = {}
# a cluster task's own options (task_options), over the process's: a joined cluster's worker runs
# the tasks of several runs at once, one a thread, each run with its own --storage-option
_task_options: ContextVar[dict[str, Any] | None] = ContextVar("geomcli_task_storage_options", default=None)
# the filesystems already checked and connected, by id (each kept here, so no id is reused):
# fsspec hands back one instance for one set of options, and readying it again cost 0.28 ms a
# call, 7 calls a file (1,800 objects from S3 to S3: 12,605 calls, 3.5 s of a 21 s run)
_ready: dict[int, AbstractFileSystem] = {}


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL of a filesystem other than the local one (``file://`` is local).

    >>> is_url("s3://bucket/a.png"), is_url("file:///tmp/a.png"), is_url("a.png"), is_url("./s3://x")
    (True, False, False, False)
    """
    match = _URL.match(path)
    return match is not None and match.group(1).lower() != "file"


def local_path(path: str) -> str:
    """A ``file://`` URL as the local path it names; any other path as it is.

    >>> local_path("file:///tmp/a%20b.png"), local_path("file://localhost/tmp/x"), local_path("a.png")
    ('/tmp/a b.png', '/tmp/x', 'a.png')
    """
    if not path[:7].lower() == "file://":
        return path
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost"):
        raise GeomError(f"{path}: a file:// URL names a file of this machine (file:///path), not of {parts.netloc}")
    if not parts.path:  # it was /: --out-dir file:// wrote into the root folder
        raise GeomError(f"{path}: a file:// URL names no path (file:///path)")
    return unquote(parts.path)


def configure(options: tuple[tuple[str, Any], ...] | dict[str, Any]) -> None:
    """The options every URL's filesystem is made with from now on, in this process
    (``--storage-option``); the filesystems' own configuration gives the rest. A run begins:
    uploads may start again after a stop_uploads. Swapped whole, never emptied on the way: a
    worker's committing thread may be making a filesystem meanwhile."""
    global _options, _stopped
    _stopped = False
    _options = dict(options)


def options() -> dict[str, Any]:
    """The options a URL's filesystem is made with here: this task's (:func:`task_options`), else
    the process's (:func:`configure`)."""
    own = _task_options.get()
    return _options if own is None else own


def filesystem_options(url: str) -> dict[str, Any]:
    """The options the filesystem of ``url`` is made with: :func:`options`, and for S3 the
    timeouts S3_TIMEOUTS under the config_kwargs given (a config_kwargs that is no mapping is
    the filesystem's to refuse)."""
    given = options()
    if DEADLINE_OPTION in given:  # (ours, for no filesystem)
        check_deadline(given[DEADLINE_OPTION])
        given = {key: value for key, value in given.items() if key != DEADLINE_OPTION}
    config = given.get("config_kwargs", {})
    if protocol(url) not in ("s3", "s3a") or not isinstance(config, dict):
        return given
    return {**given, "config_kwargs": {**S3_TIMEOUTS, **config}}


def check_deadline(value: Any) -> None:
    """Refuse a ``deadline_seconds`` that is no number of seconds above 0 (None: no deadline)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        import json

        written = value if isinstance(value, str) else json.dumps(value)  # (as typed: true, not True)
        raise PlanError(f"--storage-option {DEADLINE_OPTION}={written}: a number of seconds above 0, or null for none")


def deadline(size: int | None = None) -> float | None:
    """The seconds a read of an object that moves ``size`` bytes (None: a HEAD, or a body not
    known) may take, all its tries in; None where ``--storage-option deadline_seconds=null``."""
    given = options().get(DEADLINE_OPTION, DEADLINE_SECONDS)
    return None if given is None else float(given) + (size or 0) / SLOWEST_RATE


class StalledError(GeomError):
    """A read of an object not done by its :func:`deadline`: the store takes requests and answers
    none, or too slowly. No failure that may pass (see may_pass): trying again costs the deadline again."""


def stalled(url: str, doing: str, seconds: float) -> StalledError:
    return StalledError(f"{url}: cannot {doing} (the store stalled: not done within {round(seconds, 1):g} s, its tries "
                        f"included; --storage-option {DEADLINE_OPTION}=SECONDS waits longer)")


def _in_time(fs: AbstractFileSystem, url: str, doing: str, call: Callable[..., Any], *args: Any,
             size: int | None = None, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, a method of ``fs``, within its :func:`deadline` where ``fs``
    is asynchronous (fsspec's own wait cancels it then); a StalledError past it, or at once where
    the store is taken for dead (:func:`watching_stores`)."""
    seconds = deadline(size)
    if seconds is None or not getattr(fs, "async_impl", False):
        return call(*args, **kwargs)
    from fsspec.exceptions import FSTimeoutError

    with _watched(url, doing):
        try:
            return call(*args, timeout=seconds, **kwargs)
        except (FSTimeoutError, _PageStalled) as error:  # (a listing's page may be first past the same deadline)
            raise _kept_stall(url, stalled(url, doing, seconds)) from error


def _kept_stall(url: str, said: StalledError) -> StalledError:
    """``said``, kept for :func:`take_failed` within keeping_small_reads."""
    keep_failure(url, str(said))
    return said


# A store that answers nothing (an endpoint gone dead, a proxy that holds every request) cost each
# file its whole deadline, 32 at a time: 10,000 names took 5 hours to fail. So within
# watching_stores (a batch), once STALLS_IN_A_ROW requests to one store have each waited out its
# deadline while that store answered no request at all, each begun after the last one counted
# (requests side by side stalled by one outage are one stall), it is taken for dead, and every later
# request to it fails at once. 3: a healthy store loses a request now and then, not three with
# nothing answered between; a slow one answers some, and any answer starts the count again.
STALLS_IN_A_ROW = 3


class _Watch:
    """The stores of one batch, by name (``s3://bucket``): when each last answered (monotonic
    seconds), and how many requests in a row have stalled since with nothing answered meanwhile."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: dict[str, float] = {}
        self.silent_stalls: dict[str, int] = {}
        self.counted: dict[str, float] = {}  # when its last stall was counted


_watch: ContextVar[_Watch | None] = ContextVar("geomcli_watched_stores", default=None)


@contextmanager
def watching_stores(dead: Iterable[str] = ()) -> Iterator[None]:
    """Within it, in this thread (and the pools it starts with :func:`pool_initializer`), a store
    taken for dead (see STALLS_IN_A_ROW) is asked nothing more: each request fails at once, in a
    line that names the store and its stalls. A batch's run, a worker's or a cluster task's files:
    a store that comes back is asked again by the next run. ``dead``: stores (``s3://bucket``, as
    :func:`dead_stores` names them) taken for dead from the start, as an earlier task of the run
    found them."""
    watch = _Watch()
    watch.silent_stalls.update(dict.fromkeys(dead, STALLS_IN_A_ROW))
    token = _watch.set(watch)
    try:
        yield
    finally:
        _watch.reset(token)


def dead_stores() -> tuple[str, ...]:
    """The stores the :func:`watching_stores` this thread is in takes for dead, sorted; () outside one."""
    watch = _watch.get()
    if watch is None:
        return ()
    with watch.lock:
        return tuple(sorted(store for store, stalls in watch.silent_stalls.items() if stalls >= STALLS_IN_A_ROW))


def _store(url: str) -> str:
    """The store ``url`` is on: its protocol and bucket (or host)."""
    return f"{protocol(url)}://{url.split('://', 1)[1].split('/', 1)[0]}"


@contextmanager
def _watched(url: str, doing: str, name: str | None = None) -> Iterator[None]:
    """A request to ``url``'s store, counted by :func:`watching_stores`: refused at once (a line
    naming ``name``, else ``url``) where the store is taken for dead; a StalledError from it a
    stall, its result or the store's refusal (no such object, no permission) an answer."""
    watch = _watch.get()
    if watch is None or not is_url(url):
        yield
        return
    import time

    store = _store(url)
    with watch.lock:
        stalls = watch.silent_stalls.get(store, 0)
    if stalls >= STALLS_IN_A_ROW:
        raise _kept_stall(url, StalledError(
            f"{name or url}: cannot {doing} (not asked: {store} answered none of the last {stalls} requests, each "
            f"given its deadline, and is taken for dead in this run; --storage-option {DEADLINE_OPTION}=SECONDS "
            "waits longer)"))
    began = time.monotonic()
    try:
        yield
    except StalledError:
        with watch.lock:
            # not counted: a stall while an answer came (slow, not dead), nor one begun before the last
            # stall counted, the same silence seen again by a request beside it (32 headers read at
            # once: one outage of a deadline's length stalled them all, and gave the store up)
            if watch.answered.get(store, began - 1) < began and watch.counted.get(store, began - 1) < began:
                watch.silent_stalls[store] = watch.silent_stalls.get(store, 0) + 1
                watch.counted[store] = time.monotonic()
        raise
    except (FileNotFoundError, PermissionError, FileExistsError):
        _answered(watch, store)
        raise
    _answered(watch, store)


def _answered(watch: _Watch, store: str) -> None:
    import time

    with watch.lock:
        watch.answered[store] = time.monotonic()
        watch.silent_stalls[store] = 0


@contextmanager
def task_options(given: tuple[tuple[str, Any], ...] | dict[str, Any]) -> Iterator[None]:
    """Within it, in this thread (and the pools it starts with :func:`pool_initializer`), URLs'
    filesystems are made with ``given``, whatever another thread configures meanwhile: a task
    on a cluster's worker, beside other runs' tasks."""
    token = _task_options.set(dict(given))
    try:
        yield
    finally:
        _task_options.reset(token)


def pool_initializer() -> Callable[[], object]:
    """A thread pool's initializer: its threads make filesystems with the options this thread
    does (a cluster task's own), count its stores' stalls with it (watching_stores) and keep
    its small reads with it (keeping_small_reads)."""
    given, watch, kept = _task_options.get(), _watch.get(), _keeping.get()

    def initialize() -> None:
        _task_options.set(given)
        _watch.set(watch)
        _keeping.set(kept)

    return initialize


def protocol(url: str) -> str:
    match = _URL.match(url)
    assert match is not None
    return match.group(1).lower()


def check_bucket(url: str) -> None:
    """A GeomError for a URL that names no bucket (or host): ``s3://$BUCKET/x`` of an unset
    ``$BUCKET`` would otherwise be a local folder named ``s3:``."""
    if not url.split("://", 1)[1].split("/", 1)[0]:
        where = "host" if protocol(url) in READ_ONLY else "bucket"
        raise GeomError(f"{url}: the URL names no {where} ({protocol(url)}://{where.upper()}/...)")


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem of ``url`` and the path on it; a GeomError naming the package it needs, or
    for a URL that names no bucket."""
    check_bucket(url)
    try:
        import fsspec
    except ImportError as error:
        raise GeomError(f"{url}: URLs are read and written through fsspec, which is not installed: "
                        f"{INSTALL}") from error
    try:
        fs, path = fsspec.core.url_to_fs(url, **filesystem_options(url))
        if _ready.get(id(fs)) is fs:
            return fs, path
        _check_flags(fs.__class__)
        if fs.__class__.__name__ == "S3FileSystem":
            _retry_checksum_failures()
            fs.connect()  # its options go to botocore only now (no request is made): here, before any work
            _pages_in_time(fs)
        _ready[id(fs)] = fs
    except PlanError:
        raise
    except ImportError as error:
        package = _PACKAGES.get(protocol(url), "the fsspec filesystem for it")
        raise GeomError(f"{url}: {protocol(url)}:// needs {package}, which is not installed "
                        f"(pip install {package})") from error
    except ValueError as error:  # an unknown protocol, or options it does not take
        raise GeomError(f"{url}: {error}") from error
    except (TypeError, AttributeError) as error:  # an option the filesystem or botocore cannot take
        if not options():
            raise  # none given: a bug, or libraries that do not fit, with its traceback
        raise PlanError(_refused_option(url, error)) from error
    return fs, path


class _PageStalled(StalledError):
    """A page of a listing not done by its deadline, raised inside s3fs: its line names the bucket
    and prefix listed, where a caller that knows the URL given (listing, _in_time) does not say its own."""

    def __init__(self, where: str, seconds: float) -> None:
        super().__init__(str(stalled(where, "list the folder", seconds)))
        self.seconds = seconds


def _pages_in_time(fs: Any) -> None:
    """Each page of ``fs``'s listings (s3fs's _list_pages: one request a page, its tries in
    _call_s3) within the :func:`deadline` of one request: a listing had none, and a store whose
    list requests stall held a folder's or a glob's for all their tries (about 12 minutes). A big
    folder's pages still take what they take, each in its own time."""
    import asyncio

    pages_of = getattr(fs, "_list_pages", None)
    if pages_of is None:  # (an s3fs of another shape: its listings as they are)
        return

    async def in_time(*args: Any, **kwargs: Any) -> Any:
        pages = pages_of(*args, **kwargs)
        try:
            while True:
                seconds = deadline()
                try:
                    page = await (pages.__anext__() if seconds is None else
                                  asyncio.wait_for(pages.__anext__(), seconds))
                except StopAsyncIteration:
                    return
                except TimeoutError as error:
                    assert seconds is not None
                    where = f"s3://{kwargs.get('Bucket', '')}/{kwargs.get('Prefix', '')}"
                    raise _PageStalled(where, seconds) from error
                yield page
        finally:
            await pages.aclose()

    fs._list_pages = in_time


def _retry_checksum_failures() -> None:
    """Have s3fs make a read again when its body fails botocore's checksum (a response cut short),
    as it does when its request fails: a zarr chunk's read that did failed its whole array's job."""
    import s3fs.core
    from botocore.exceptions import FlexibleChecksumError

    if not issubclass(FlexibleChecksumError, s3fs.core.S3_RETRYABLE_ERRORS):
        s3fs.core.add_retryable_error(FlexibleChecksumError)


def _check_flags(filesystem_class: Any) -> None:
    """Refuse text for an option of the filesystem's that is true or false (--storage-option
    anon=maybe): the filesystem would take any text as true."""
    import inspect

    parameters = inspect.signature(filesystem_class.__init__).parameters
    for key, value in options().items():
        if key in parameters and isinstance(parameters[key].default, bool) and not isinstance(value, bool):
            raise PlanError(f"--storage-option {key}={value}: {key} is true or false")


def _refused_option(url: str, error: BaseException) -> str:
    """What a filesystem's TypeError or AttributeError over its options says, naming the option
    (the message names --storage-option: a plan's usage error passes on its text alone)."""
    named = re.search(r"keyword argument '(\w+)'", str(error))
    if named is not None and named.group(1) in options():
        return f"--storage-option {named.group(1)}: {protocol(url)}:// takes no such option"
    return f"--storage-option: {protocol(url)}:// cannot take the options given ({_first_line(error)})"


def canonical(url: str) -> str:
    """The one spelling of ``url`` (the protocol's first name, its path as the filesystem keeps
    it), so two names of one object compare equal."""
    fs, path = filesystem(url)
    return str(fs.unstrip_protocol(path))


@contextmanager
def _errors(url: str, doing: str) -> Iterator[None]:
    """The filesystem's failures as a GeomError naming ``url``, chained (an I/O error that may
    pass stays in the chain, where a batch on Dask looks for it)."""
    try:
        yield
    except FileNotFoundError as error:
        said = _http_refusal(error, doing) or _unreached(error, doing) or "no such file"
        raise GeomError(f"{url}: {said}") from error
    except PermissionError as error:
        raise GeomError(f"{url}: permission denied{_refusal_reason(error)}") from error
    except IsADirectoryError as error:
        raise GeomError(f"{url}: is a directory") from error
    except _failures() as error:
        raise GeomError(f"{url}: {_http_refusal(error, doing) or f'cannot {doing} ({_first_line(error)})'}") from error


def _refusal_reason(error: PermissionError) -> str:
    """The store's reason for a refusal, where it says more than that it refused (' (The provided
    token has expired.)': credentials that ran out mid-run, not a bucket's policy)."""
    reason = _first_line(error)
    generic = {"", "access denied", "forbidden", "permission denied", type(error).__name__.lower()}
    return "" if reason.strip(". ").lower() in generic else f" ({reason})"


def _http_refusal(error: BaseException, doing: str) -> str | None:
    """What an HTTP status in ``error``'s chain other than 404 or 410 says: 401 and 403 as
    permission denied, another as what could not be done; with the status. fsspec's http://
    reports any failed request as a FileNotFoundError (a private object read 'no such file')."""
    try:
        from aiohttp import ClientResponseError
    except ImportError:
        return None
    seen: BaseException | None = error
    for _ in range(20):  # a chain is short; never a cycle followed forever
        if seen is None:
            return None
        if isinstance(seen, ClientResponseError):
            if seen.status in (404, 410):
                return None
            refused = "permission denied" if seen.status in (401, 403) else f"cannot {doing}"
            reason = f" {seen.message}" if seen.message else ""
            return f"{refused} (HTTP {seen.status}{reason})"
        seen = seen.__cause__ or seen.__context__
    return None


def _unreached(error: FileNotFoundError, doing: str) -> str | None:
    """What could not be done, with aiohttp's reason, where fsspec's http:// reports a host it
    could not reach (a connection refused, a name that does not resolve) as a FileNotFoundError:
    a server that was down read 'no such file', as if the name were wrong."""
    try:
        from aiohttp import ClientConnectionError
    except ImportError:
        return None
    cause = error.__cause__ or error.__context__
    return f"cannot {doing} ({_first_line(cause)})" if isinstance(cause, ClientConnectionError) else None


def _failures() -> tuple[type[BaseException], ...]:
    """What a filesystem raises when it fails: OSError, and the failures of the libraries under
    it that are none (botocore's: no credentials, an endpoint that does not answer; aiohttp's: an
    HTTP status). Looked up only once one is raised."""
    found: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError

        found.append(BotoCoreError)
    except ImportError:
        pass
    try:
        from aiohttp import ClientError

        found.append(ClientError)
    except ImportError:
        pass
    return tuple(found)


# errnos of a failure that may pass: a retry can succeed where the first try failed
_PASSING = {errno.EIO, errno.EAGAIN, errno.EBUSY, errno.EINTR, errno.ETIMEDOUT, errno.ECONNRESET,
            errno.ECONNREFUSED, errno.ECONNABORTED, errno.ENETDOWN, errno.ENETUNREACH, errno.ENETRESET,
            errno.EHOSTUNREACH, errno.EHOSTDOWN, errno.ESTALE, errno.EPIPE,
            getattr(errno, "EREMOTEIO", errno.EIO)}  # s3fs's for S3's 500 InternalError: 'try again'


def may_pass(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is an I/O error that may pass (a reset
    connection, a timeout, EIO, S3's 500; botocore's and aiohttp's own: :func:`passing_failure`),
    which a retry could overcome; not a bad file, nor a missing one."""
    seen: BaseException | None = error
    for _ in range(100):  # a chain is short; never a cycle followed forever
        if seen is None or isinstance(seen, StalledError):  # (raised from a timeout, which may pass)
            return False
        if isinstance(seen, (ConnectionError, TimeoutError)) or (
                isinstance(seen, OSError) and seen.errno in _PASSING) or passing_failure(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def passing_failure(error: BaseException) -> bool:
    """Whether ``error`` is a store's failure that may pass, raised as no ConnectionError or
    TimeoutError: botocore's (a connection closed, reset or timed out, a body cut short or whose
    checksum did not match) and aiohttp's (the same, over http:// and gcsfs). A certificate
    refused is none. Only libraries already loaded are asked: a failure of theirs loaded them."""
    import sys

    kinds: list[type[BaseException]] = []
    refused: list[type[BaseException]] = []
    if "botocore.exceptions" in sys.modules:
        from botocore import exceptions as boto

        kinds += [boto.HTTPClientError, boto.ConnectionError, boto.FlexibleChecksumError, boto.IncompleteReadError]
        refused.append(boto.SSLError)
    if "aiohttp" in sys.modules:
        import aiohttp

        kinds += [aiohttp.ClientConnectionError, aiohttp.ClientPayloadError]
        refused.append(aiohttp.ClientSSLError)
    return isinstance(error, tuple(kinds)) and not isinstance(error, tuple(refused))


def _first_line(error: BaseException) -> str:
    # s3fs gives S3's refusals an errno ('[Errno 121] We encountered an internal error.'): the text alone
    text = error.strerror if isinstance(error, OSError) and error.errno and error.strerror else str(error)
    lines = str(text).strip().splitlines()
    return " ".join(lines[0].split())[:200] if lines else type(error).__name__


def check_readable(url: str) -> None:
    """One request to the folder ``url``, whose failure (no credentials, an endpoint that does not
    answer, no permission) is the GeomError a file's read gives: before a reader of many requests
    at once (zarr's) meets it in each, with a traceback for every one left running."""
    fs, path = filesystem(url)
    with _errors(url, "read"):
        _in_time(fs, url, "read", fs.isdir, path)


# sizes of objects as the plan's listing told them, while their job runs (listed_size): a worker
# process has not listed them, and asking (a HEAD) was 1 request of every 4 of a -j 2 run from
# S3 to S3
_listed_sizes: dict[str, int] = {}


@contextmanager
def listed_size(url: str, size: int | None) -> Iterator[None]:
    """Within it, a read of ``url`` takes ``size`` (bytes, from a listing) for the object's,
    unasked; None: it asks, as without."""
    with _held(_listed_sizes, url, size):
        yield


@contextmanager
def _held(table: dict[str, Any], url: str, value: Any) -> Iterator[None]:
    """Within it, ``table`` holds ``value`` by ``url``'s canonical spelling; nothing for a value
    of None or a local path."""
    if value is None or not is_url(url):
        yield
        return
    key = canonical(url)
    table[key] = value
    try:
        yield
    finally:
        table.pop(key, None)


# Within keeping_small_reads (a batch's check of its headers, before its run), the objects read
# whole (one of at most io.HEAD_BYTES; a TIFF read past its ranges or found damaged by them, a
# format whose header is read whole) are kept by canonical URL, KEPT_BYTES in all, for
# take_kept: its run was then a second GET of each, the whole of a 200 MB TIFF. Off within
# given_bytes, a read of its URL takes the bytes it was given. The lines of the reads that
# stalled and of the objects read whole whose header could not be read are kept too (for
# take_failed): its run waited out the deadline again, or read the damaged object again to fail it so.
KEPT_BYTES = 64 << 20
_given: dict[str, bytes] = {}


class _Kept:
    """What one keeping_small_reads keeps: bytes by canonical URL, at most ``limit`` in all
    (taken ones still count: the jobs hold them until done) and ``largest`` an object, and the
    lines of failed reads."""

    def __init__(self, limit: int, largest: int) -> None:
        self.limit, self.largest, self.total = limit, largest, 0
        self.data: dict[str, bytes] = {}
        self.failed: dict[str, str] = {}
        self.lock = threading.Lock()

    def add(self, key: str, data: bytes) -> None:
        if len(data) > self.largest:
            return
        with self.lock:
            if self.total + len(data) <= self.limit:
                self.data[key] = data
                self.total += len(data)


# the store of the keeping_small_reads this thread is in (a context's: a cluster worker's threads
# check the headers of several tasks at once, each keeping its own)
_keeping: ContextVar[_Kept | None] = ContextVar("geomcli_kept_reads", default=None)


@contextmanager
def keeping_small_reads(limit: int | None = None, largest: int | None = None) -> Iterator[None]:
    """Within it, in this thread (and the pools it starts with :func:`pool_initializer`), the
    objects read whole are kept for :func:`take_kept` (see above), ``limit`` bytes in all
    (KEPT_BYTES where None), ``largest`` bytes an object (where None, as many as ``limit``);
    those not taken are dropped as it ends."""
    limit = KEPT_BYTES if limit is None else limit
    token = _keeping.set(_Kept(limit, limit if largest is None else largest))
    try:
        yield
    finally:
        _keeping.reset(token)


def take_kept(url: str) -> bytes | None:
    """The bytes of ``url`` kept by :func:`keeping_small_reads`, no longer kept; None if none."""
    kept = _keeping.get()
    if kept is None or not kept.data or not is_url(url):
        return None
    with kept.lock:
        return kept.data.pop(canonical(url), None)


def keep_failure(url: str, line: str) -> None:
    """Keep ``line``, the failure of a read of ``url`` its run would meet again (a read that
    stalled, an object read whole whose header cannot be read), for :func:`take_failed`, within
    :func:`keeping_small_reads`."""
    kept = _keeping.get()
    if kept is not None and is_url(url):
        with kept.lock:
            kept.failed[canonical(url)] = line


def take_failed(url: str) -> str | None:
    """The line :func:`keep_failure` kept of ``url`` within :func:`keeping_small_reads`, no longer
    kept; None if none."""
    kept = _keeping.get()
    if kept is None or not kept.failed or not is_url(url):
        return None
    with kept.lock:
        return kept.failed.pop(canonical(url), None)


def _keep(fs: AbstractFileSystem, path: str, data: bytes) -> None:
    kept = _keeping.get()
    if kept is not None:
        kept.add(str(fs.unstrip_protocol(path)), data)


@contextmanager
def given_bytes(url: str, data: bytes | None) -> Iterator[None]:
    """Within it, a read of ``url`` takes ``data`` (the object's bytes, read before: take_kept)
    for the object's, unasked; None: it reads, as without."""
    with _held(_given, url, data):
        yield


def read_bytes(url: str, limit: int, past_limit: str) -> bytes:
    """The whole object at ``url``; a GeomError for a missing one, a failed read, or one past
    ``limit`` bytes (its message ending in ``past_limit``: what the limit is and what raises it)."""
    fs, path = filesystem(url)
    given = _given.get(str(fs.unstrip_protocol(path)))
    shared = _shared.get()
    if given is None and shared is not None:
        data, size = shared.get(str(fs.unstrip_protocol(path)), (b"", None))
        given = data if size == len(data) else None
    if given is not None:
        _check_limit(url, len(given), limit, past_limit)
        return given
    with _errors(url, "read"):
        data = _whole(fs, path, url, _size(fs, path, url), limit, past_limit)
    _keep(fs, path, data)
    _share(fs, path, data, len(data))
    return data


def read_head(url: str, count: int, limit: int, past_limit: str) -> tuple[bytes, int | None]:
    """The object at ``url``'s first ``count`` bytes, in one ranged request (the whole object,
    as :func:`read_bytes` reads it, where it is no longer or its size cannot be told), and its
    size in bytes (None where it cannot be told)."""
    fs, path = filesystem(url)
    given = _given.get(str(fs.unstrip_protocol(path)))
    if given is not None:
        _check_limit(url, len(given), limit, past_limit)
        return given, len(given)
    shared = _shared.get()
    kept = None if shared is None else shared.get(str(fs.unstrip_protocol(path)))
    if kept is not None and (kept[1] == len(kept[0]) or len(kept[0]) >= count):
        return kept
    with _errors(url, "read"):
        size = _size(fs, path, url)
        if size is not None and size > count:
            head = _whole_body(lambda: bytes(_in_time(fs, url, "read", fs.cat_file, path, start=0, end=count,
                                                      size=count)), count)
            _share(fs, path, head, size)
            return head, size
        data = _whole(fs, path, url, size, limit, past_limit)
    _keep(fs, path, data)
    _share(fs, path, data, len(data))
    return data, len(data)


def read_tail(url: str, start: int, size: int) -> bytes:
    """The object at ``url``'s bytes from ``start`` to its ``size`` (as :func:`read_head` told
    it), in one ranged request."""
    fs, path = filesystem(url)
    with _errors(url, "read"):
        return _whole_body(lambda: bytes(_in_time(fs, url, "read", fs.cat_file, path, start=start, end=size,
                                                  size=size - start)), size - start)


# A TIFF's header at a URL is read by ranges (RangedObject), where tifffile seeks: its IFDs may be
# anywhere (after the pixels, as libtiff and Pillow write them), and the header check read each
# object whole, then its run again (a batch of 200 MB TIFFs moved every byte twice). Each request
# reads RANGE_BYTES at least; past RANGED_READS of them (a long stack's IFDs, one by each page)
# the rest of the object is read whole, one request more.
RANGE_BYTES = 64 << 10
RANGED_READS = 8


class RangedObject(io.RawIOBase):
    """The object at ``url`` of ``size`` bytes as a read-only file, from its first bytes ``head``,
    read by ranges as it is read (see RANGE_BYTES above); the ranges read are shared within
    :func:`shared_reads` (a dry run's header, then its metadata). ``failure``: the store's failure
    of a read, where one failed (a reader may have taken it for damage)."""

    def __init__(self, url: str, head: bytes, size: int, limit: int, past_limit: str) -> None:
        super().__init__()
        self.url, self.size, self.position = url, size, 0
        self.limit, self.past_limit = limit, past_limit  # (read_bytes's, for the rest read whole)
        self.failure: GeomError | None = None
        shared = _shared_ranges.get()
        self.ranges: list[tuple[int, bytes]] = [] if shared is None else shared.setdefault(canonical(url), [])
        if not self.ranges:
            self.ranges.append((0, head))
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = max(0, offset + (0, self.position, self.size)[whence])
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self.size, self.position + len(view))
        if end <= self.position:
            return 0
        data = self._bytes(self.position, end)
        view[: len(data)] = data
        self.position += len(data)
        return len(data)

    def _bytes(self, start: int, end: int) -> bytes:
        for first, data in self.ranges:
            if first <= start and end <= first + len(data):
                return data[start - first : end - first]
        try:
            if self.requests >= RANGED_READS:  # the rest whole: many more ranges would cost more requests
                self.ranges[:] = [(0, read_bytes(self.url, self.limit, self.past_limit))]
                return self.ranges[0][1][start:end]
            self.requests += 1
            last = min(self.size, max(end, start + RANGE_BYTES))
            self.ranges.append((start, read_tail(self.url, start, last)[: last - start]))
        except GeomError as error:
            self.failure = error
            raise
        return self.ranges[-1][1][: end - start]


def open_ranged(url: str, head: bytes, size: int, limit: int, past_limit: str) -> BinaryIO:
    """The object at ``url`` of ``size`` bytes, whose first bytes ``head`` are read, as a file read
    by ranges (RangedObject); read whole past its ranges as :func:`read_bytes` reads it."""
    return io.BufferedReader(RangedObject(url, head, size, limit, past_limit))


def ranged_failure(source: object) -> GeomError | None:
    """The store's failure of a read of ``source``, a file :func:`open_ranged` gave; None if none
    failed, or it is none: not a damaged file to read again whole."""
    raw = getattr(source, "raw", None)
    return raw.failure if isinstance(raw, RangedObject) else None


# within shared_reads(): the bytes read of each object (whole, or its first: read_head) and its size
_shared: ContextVar[dict[str, tuple[bytes, int | None]] | None] = ContextVar("geomcli_shared_reads", default=None)
# and the ranges a RangedObject read of each
_shared_ranges: ContextVar[dict[str, list[tuple[int, bytes]]] | None] = ContextVar("geomcli_shared_ranges",
                                                                                    default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within it, in this thread, an object's first bytes or whole bytes are read once: a dry run
    read a URL's first bytes for its header, then for its metadata again. For one file's checks:
    not longer, where the object could change."""
    token = _shared.set({} if _shared.get() is None else _shared.get())
    ranges = _shared_ranges.set({} if _shared_ranges.get() is None else _shared_ranges.get())
    try:
        yield
    finally:
        _shared_ranges.reset(ranges)
        _shared.reset(token)


def _share(fs: AbstractFileSystem, path: str, data: bytes, size: int | None) -> None:
    shared = _shared.get()
    if shared is not None:
        shared[str(fs.unstrip_protocol(path))] = (data, size)


def _size(fs: AbstractFileSystem, path: str, url: str) -> int | None:
    """The object's size as a listing told it (listed_size), else as the filesystem says (a HEAD)."""
    size = _listed_sizes.get(str(fs.unstrip_protocol(path)))
    return _in_time(fs, url, "read", fs.size, path) if size is None else size


def _check_limit(url: str, size: int | None, limit: int, past_limit: str) -> None:
    if size is not None and size > limit:
        raise GeomError(f"{url}: {size} bytes, more than {limit}{past_limit}")


def _whole(fs: AbstractFileSystem, path: str, url: str, size: int | None, limit: int, past_limit: str) -> bytes:
    _check_limit(url, size, limit, past_limit)
    # s3fs asks the size again (a HEAD) before a whole read, to read one past its block size
    # (50 MiB) in ranges side by side: told it is not, one request of 3 is saved
    one_read = (fs.__class__.__name__ == "S3FileSystem" and size is not None
                and size <= getattr(fs, "default_block_size", 0))
    more = {"max_concurrency": 1} if one_read else {}
    return _whole_body(lambda: bytes(_in_time(fs, url, "read", fs.cat_file, path, size=size, **more)), size)


# how often in all a read whose body came shorter than the object is made: s3fs makes a request
# again when it fails (or its body fails its checksum: _retry_checksum_failures), not when a 200's
# body is whole and short
READ_TRIES = 3


def _whole_body(read: Callable[[], bytes], size: int | None) -> bytes:
    """``read()``, made again where its body came shorter than the ``size`` the object was said to
    have (a listing's or a HEAD's; an object replaced by a shorter one meanwhile fails so too);
    still so after READ_TRIES, a ConnectionError (a failure that may pass: a batch on Dask tries
    the file again)."""
    for _ in range(READ_TRIES):
        data = read()
        if size is None or len(data) >= size:
            return data
    raise ConnectionError(f"the response ended after {len(data)} of {size} bytes")


def write_bytes(url: str, data: bytes, name: str) -> None:
    """Place ``data`` as the whole object at ``url`` (see the module docstring); at once, or as
    the commit deferred_commits leaves to its caller."""
    from geomcli.io import _atomic

    if protocol(url) in READ_ONLY:
        raise GeomError(f"{name}: {protocol(url)}:// is for reading; write to s3://, gs://, az:// or a file")
    # what atomic_file would do in this thread: -n (no_replace), a commit left to the caller
    create = not _atomic.replaces()

    def put() -> None:
        _atomic.refuse_after_signal()  # as a file: nothing is placed once Ctrl-C or SIGTERM came
        _put(url, data, name, create, _atomic.cancellation())

    if not _atomic.defer(put):
        put()


def _put(url: str, data: bytes, name: str, create: bool, cancelled: Callable[[], bool] | None = None) -> None:
    from geomcli.io import _atomic

    fs, path = filesystem(url)
    try:
        if fs.__class__.__name__ == "S3FileSystem":
            seconds = deadline(len(data))
            with _watched(url, "write", name):
                if not _run_stoppably(fs, _put_s3(fs, path, data, create, cancelled), seconds):
                    raise stalled(name, "write", seconds or 0)
        else:
            _in_time(fs, name, "write", fs.pipe_file, path, data, size=len(data),
                     **({"mode": "create"} if create else {}))
    except FileExistsError as error:
        raise _atomic.appeared(name) from error
    except PermissionError as error:
        raise GeomError(f"{name}: permission denied{_refusal_reason(error)}") from error
    except _failures() as error:
        if create and _precondition_failed(error):
            raise _atomic.appeared(name) from error
        raise GeomError(f"{name}: cannot write ({_first_line(error)})") from error


async def _put_s3(fs: Any, path: str, data: bytes, create: bool, cancelled: Callable[[], bool] | None = None) -> None:
    """Put ``data`` at ``path`` on S3: in one request below MULTIPART_BYTES, else as a multipart
    upload in parts of half that, aborted on any failure or cancellation (s3fs's own pipe_file
    aborts on an Exception only, and a Ctrl-C here cancels it: its upload was left pending, and
    billed, for good). Its parts are never completed once a signal has stopped the run; once
    ``cancelled()`` is true (the work it was for cancelled: io._atomic.stopped_when) it sends no
    more of them, and is aborted."""
    import asyncio

    from geomcli.io import _atomic

    bucket, key, _ = fs.split_path(path)
    condition = {"IfNoneMatch": "*"} if create else {}
    if len(data) < MULTIPART_BYTES:
        await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)
        fs.invalidate_cache(path)
        return
    creating = asyncio.ensure_future(fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key))
    upload = None
    part = MULTIPART_BYTES // 2
    numbers = range(1, -(-len(data) // part) + 1)
    try:
        upload = (await asyncio.shield(creating))["UploadId"]  # shielded: a cancel still learns its id
        parts: list[dict[str, Any]] = []
        for first in range(0, len(numbers), fs.max_concurrency):  # at most max_concurrency parts in flight
            batch = numbers[first:first + fs.max_concurrency]
            sent = await asyncio.gather(*(fs._call_s3("upload_part", Bucket=bucket, Key=key, UploadId=upload,
                                                      PartNumber=number, Body=data[(number - 1) * part:number * part])
                                          for number in batch))
            parts += [{"PartNumber": number, "ETag": done["ETag"]} for number, done in zip(batch, sent, strict=True)]
            if cancelled is not None and cancelled():
                raise _atomic.Cancelled(f"{path}: the upload's work was cancelled; it was aborted")
        if _atomic.signal_taken() is not None:
            raise asyncio.CancelledError  # the caller is raising the signal's exception meanwhile
        try:
            await fs._call_s3("complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload,
                              MultipartUpload={"Parts": parts}, **condition)
        except _failures():
            # its answer lost (a reset, a timeout, a 500 once S3 had completed it): s3fs asked
            # again, and the upload was no more (or, under -n, the object there): ours or not
            if not await _completed(fs, bucket, key, parts):
                raise
    except BaseException:
        with suppress(*_failures()):  # the failure that stopped the upload is the one to report
            if upload is None:  # cancelled while the upload was being made: made all the same
                upload = (await creating)["UploadId"]
            await fs._call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
        raise
    fs.invalidate_cache(path)


async def _completed(fs: Any, bucket: str, key: str, parts: list[dict[str, Any]]) -> bool:
    """Whether the object at ``key`` is the multipart upload of ``parts``: its ETag is S3's, the
    MD5 of the parts' MD5s and their count (an object another put there has another)."""
    import hashlib

    try:
        digests = b"".join(bytes.fromhex(part["ETag"].strip('"')) for part in parts)
    except ValueError:  # an ETag of no MD5 (SSE-KMS): not told, so not ours
        return False
    try:
        found = await fs._call_s3("head_object", Bucket=bucket, Key=key)
    except _failures():
        return False
    expected = f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"
    return str(found.get("ETag", "")).strip('"') == expected


def abort_pending_uploads(url: str) -> int:
    """Abort the multipart uploads pending at ``url`` on S3, how many: what a writer killed on its
    way leaves (SIGKILL: the OOM killer, or a nanny's after 4 s), no object but parts kept, and
    billed, until aborted. For a caller that stopped a writer of ``url`` and knows no other is
    running, as io._atomic.remove_leftovers (jobs.remove_leftovers): S3 does not say whose an
    upload is, so another process's at this key is aborted too. A sweep that fails leaves them,
    and never fails the run."""
    fs, path = filesystem(url)
    if fs.__class__.__name__ != "S3FileSystem":
        return 0
    bucket, key, _ = fs.split_path(path)
    uploads: list[str] = []
    aborted = 0
    try:
        page: dict[str, Any] = {}
        while True:  # up to 1000 a page: the next from the markers while IsTruncated
            listed = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key, **page)
            uploads += [upload["UploadId"] for upload in listed.get("Uploads", []) if upload["Key"] == key]
            if not listed.get("IsTruncated"):
                break
            page = {"KeyMarker": listed["NextKeyMarker"], "UploadIdMarker": listed["NextUploadIdMarker"]}
        for upload in uploads:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
            aborted += 1
    except _failures():
        pass
    return aborted


# the uploads under way in this process (their tasks on fsspec's loop, and the events their ends
# set), for stop_uploads; and whether it has been called (no upload starts since, until configure)
_under_way: dict[Any, Any] = {}
_stopped = False
# how long a stopped upload may take to abort before the process goes on without it
ABORT_SECONDS = 10.0


def _run_stoppably(fs: Any, upload: Any, seconds: float | None = None) -> bool:
    """Run the coroutine ``upload`` on the filesystem's event loop, waiting for it here, at most
    ``seconds`` (None: for ever): whether it was done in time; one that was not is cancelled, and
    waited for while it aborts. Should the wait be interrupted (Ctrl-C or SIGTERM raise here;
    fsspec's own wait would leave the upload running on its thread until the process dies), the
    upload is cancelled so too, before the interruption goes on."""
    import asyncio
    import threading
    import time

    if _stopped:
        upload.close()
        raise InterruptedError("the process is ending")
    ended = threading.Event()

    async def start() -> Any:
        task = asyncio.ensure_future(upload)
        task.add_done_callback(lambda _: ended.set())
        return task

    task = asyncio.run_coroutine_threadsafe(start(), fs.loop).result()
    _under_way[task] = (fs.loop, ended)
    until = None if seconds is None else time.monotonic() + seconds
    try:
        while not ended.wait(1 if until is None else max(0.0, min(1.0, until - time.monotonic()))):
            if until is not None and time.monotonic() >= until:  # (else in steps: a signal's handler runs between them)
                _stop(task)
                return task.done() and not task.cancelled() and task.exception() is None  # (done meanwhile)
    except BaseException:
        _stop(task)
        raise
    finally:
        _under_way.pop(task, None)
    if task.cancelled():  # by stop_uploads, from the thread ending the process
        raise InterruptedError("the upload was stopped")
    task.result()
    return True


def _stop(task: Any) -> None:
    """Cancel an upload under way and wait (a bounded time) while it aborts; a signal that comes
    meanwhile is held until then."""
    from geomcli.io import _atomic

    if task not in _under_way:
        return  # ended meanwhile
    loop, ended = _under_way[task]
    release = _atomic.hold_signals()
    try:
        loop.call_soon_threadsafe(task.cancel)
        ended.wait(ABORT_SECONDS)
    finally:
        release()


def stop_uploads() -> None:
    """Cancel every upload under way in this process, their multipart uploads aborted, and start
    no more: for a process about to end without unwinding (a batch worker's SIGTERM, whose
    committing thread would otherwise go on to its next output). The zarr chunk puts in flight
    are waited for (a bounded time), not cancelled: a put whose bytes were sent lands all the
    same, and one that landed after the sweep that follows had listed its array was left there."""
    import time

    global _stopped
    _stopped = True
    for task in list(_under_way):
        _stop(task)
    until = time.monotonic() + ABORT_SECONDS
    while _chunk_puts and time.monotonic() < until:
        time.sleep(0.01)


# the zarr chunk puts in flight in this process (io._zarr_store's), for stop_uploads to wait for
_chunk_puts: list[str] = []


@contextmanager
def chunk_put(key: str) -> Iterator[None]:
    """Around a zarr chunk's put (its tries included): counted while in flight, refused once
    stop_uploads was called."""
    if _stopped:
        raise InterruptedError("the process is ending")
    _chunk_puts.append(key)  # (list.append and remove are atomic: puts run on zarr's loop thread)
    try:
        yield
    finally:
        _chunk_puts.remove(key)


def _precondition_failed(error: BaseException) -> bool:
    """Whether a conditional create failed because the object exists (S3's 412 PreconditionFailed)."""
    seen: BaseException | None = error
    for _ in range(20):
        if seen is None:
            return False
        text = str(seen)
        if "PreconditionFailed" in text or "412" in text or "ConditionalRequestConflict" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Entry(NamedTuple):
    """A file a listing found, or a zarr array (a folder named .zarr, one entry): its URL, its size
    in bytes and its modified time (ns, or None; an array's is its newest file's)."""

    url: str
    size: int | None
    modified: int | None


# modified times the listings told, by canonical URL (a zarr array's: its newest file's); and the
# folders listed, each with whether at every depth: a URL not found in one is no file
_modified: dict[str, int | None] = {}
_listed: dict[str, bool] = {}


def listing(url: str, recursive: bool = True, folders: list[str] | None = None) -> list[Entry]:
    """The files under the folder ``url`` (all depths, or its own with ``recursive`` False), in
    the listing's order, a zarr array among them as one entry (its files left out); none for a
    folder that is not there. Their modified times are kept for :func:`modified`; an array's
    only where the listing saw all its files (at every depth). Without ``recursive`` the URLs of
    its subfolders that are no zarr array are added to ``folders``."""
    fs, root = filesystem(url)
    if protocol(url) in READ_ONLY:
        return []
    with _errors(url, "list the folder"), _watched(url, "list the folder"):
        fs.invalidate_cache(root)
        try:
            if recursive:
                found = fs.find(root, detail=True)
            else:
                # ls, not find(maxdepth=1): fsspec's walk drops a failed listing as an empty one, and
                # ls names the subfolders, zarr arrays among them
                try:
                    found = {info["name"]: info for info in fs.ls(root, detail=True)}
                except FileNotFoundError:
                    found = {}
        except _PageStalled as error:  # (a page past its deadline: _pages_in_time)
            raise stalled(url, "list the folder", error.seconds) from error
    base = str(fs.unstrip_protocol(root)).rstrip("/")
    entries = []
    arrays: dict[str, int | None] = {}
    for path, info in found.items():
        entry = Entry(str(fs.unstrip_protocol(path)), info.get("size"), _info_modified(info))
        array = _array_of(entry.url, base)
        if array is not None and recursive:
            arrays[array] = max((time for time in (arrays.get(array), entry.modified) if time is not None),
                                default=None)
        elif array is not None:
            arrays.setdefault(array, None)  # its files not seen: no modified time
        elif info.get("type") != "directory" and not path.endswith("/"):  # "day/": a folder's marker (S3's console)
            _modified[entry.url] = entry.modified
            entries.append(entry)
        elif folders is not None and not recursive and entry.url.rstrip("/") != base:
            folders.append(entry.url.rstrip("/"))
    for array, newest in arrays.items():
        if recursive:
            _modified[array] = newest
        entries.append(Entry(array, None, newest))
    _listed[base + "/"] = recursive
    return entries


def _array_of(url: str, base: str) -> str | None:
    """The zarr array at or below the listed folder ``base`` that ``url`` is, or is in, if any.

    >>> _array_of("s3://b/in/a.zarr/c/0/0", "s3://b/in"), _array_of("s3://b/a.zarr/zarr.json", "s3://b/a.zarr")
    ('s3://b/in/a.zarr', 's3://b/a.zarr')
    >>> _array_of("s3://b/in/a.png", "s3://b/in"), _array_of("s3://b/in/a.zarr", "s3://b/in")
    (None, 's3://b/in/a.zarr')
    """
    if _is_array(base):
        return base
    names = url[len(base) + 1:].split("/") if url.startswith(base + "/") else []
    for count, name in enumerate(names, 1):
        if _is_array(name):
            return "/".join([base, *names[:count]])
    return None


def _is_array(name: str) -> bool:
    """A zarr array, as _zarr.is_zarr says (which this module cannot import: _zarr imports it)."""
    return name.rstrip("/").lower().endswith(".zarr")


def is_folder(url: str) -> bool:
    """Whether ``url`` is a folder (a prefix under which objects are) rather than an object."""
    if protocol(url) in READ_ONLY:
        return False
    fs, path = filesystem(url)
    with _errors(url, "look at it"):
        return bool(_in_time(fs, url, "look at it", fs.isdir, path))


def named(url: str) -> Entry | None:
    """The object ``url`` names, as a listing gives it (its size, and its modified time kept for
    :func:`modified`), or None where it names a folder (a prefix under which objects are). One
    request for an object (a HEAD), where is_folder's listing and then the header's and the
    read's asking its size made three: a --files-from of 5,000 names on S3. A missing object is
    an Entry of no size, its read's to fail."""
    if protocol(url) in READ_ONLY:
        return Entry(url, None, None)
    fs, path = filesystem(url)
    with _errors(url, "look at it"):
        try:
            info = _in_time(fs, url, "look at it", fs.info, path)
        except FileNotFoundError:
            return Entry(url, None, None)
        except PermissionError:  # a HEAD's refusal has no body to say why (bad keys): a listing's says it
            return None if is_folder(url) else Entry(url, None, None)
    if info.get("type") == "directory":
        return None
    entry = Entry(url, info.get("size"), _info_modified(info))
    _modified[canonical(url)] = entry.modified
    return entry


def modified(url: str) -> int | None:
    """The modified time of the file at ``url`` in ns (of a zarr array: its newest file's): from
    a listing made, else asked of the store; None where there is no such file."""
    key = canonical(url)
    if key in _modified:
        return _modified[key]
    if _is_array(key):
        if not any(key.startswith(folder) for folder, deep in _listed.items() if deep):
            listing(url, True)  # its files: a request per 1000 of them
        return _modified.get(key)
    if any(key.startswith(folder) and (deep or "/" not in key[len(folder):]) for folder, deep in _listed.items()):
        return None  # listed, and not found there
    fs, path = filesystem(url)
    try:
        info = _in_time(fs, url, "look at it", fs.info, path)
    except FileNotFoundError:
        return None
    except _failures() as error:
        raise GeomError(f"{url}: cannot look at it ({_first_line(error)})") from error
    _modified[key] = _info_modified(info)
    return _modified[key]


def _info_modified(info: dict[str, Any]) -> int | None:
    """A listing's modified time in ns: S3's LastModified, GCS's updated, Azure's last_modified, mtime."""
    import datetime

    for key in ("LastModified", "last_modified", "updated", "mtime", "modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            return int(value.timestamp() * 1_000_000_000)
        if isinstance(value, str):
            try:
                return int(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
            except ValueError:
                continue
        if isinstance(value, (int, float)):
            return int(value * 1_000_000_000)
    return None


def forget() -> None:
    """Drop what the listings told (a new run looks again)."""
    _modified.clear()
    _listed.clear()

