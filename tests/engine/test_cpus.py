"""geomcli.cpus.share: pieces of work on several threads, every piece done once, failures raised."""

from __future__ import annotations

import threading
import time

import pytest

from geomcli import cpus


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("count", [0, 1, 2, 7])
def test_every_piece_is_done_once(threads: int, count: int) -> None:
    done: list[int] = []
    lock = threading.Lock()

    def work(piece: int) -> None:
        with lock:
            done.append(piece)

    cpus.share(range(count), work, threads)
    assert sorted(done) == list(range(count))


def test_without_threads_to_be_had_the_caller_does_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    done: list[tuple[int, int]] = []
    cpus.share(range(6), lambda piece: done.append((piece, threading.get_ident())), 3)
    assert sorted(done) == [(piece, threading.get_ident()) for piece in range(6)]


def test_a_helpers_failure_is_raised_in_the_caller() -> None:
    def work(piece: int) -> None:
        if piece == 5:
            raise ValueError("piece 5")

    with pytest.raises(ValueError, match="piece 5"):
        cpus.share(range(6), work, 2)


def test_the_callers_failure_waits_for_the_helpers() -> None:
    finished: list[int] = []

    def work(piece: int) -> None:
        if piece == 0:
            raise ValueError("piece 0")
        time.sleep(0.2)
        finished.append(piece)

    with pytest.raises(ValueError, match="piece 0"):
        cpus.share(range(2), work, 2)
    assert finished == [1]  # done before share raised: nothing of the call runs on after it


def test_no_piece_is_begun_after_one_has_failed() -> None:
    begun: list[int] = []

    def work(piece: int) -> None:
        begun.append(piece)
        if piece == 0:
            raise ValueError("piece 0")
        time.sleep(0.01)

    with pytest.raises(ValueError, match="piece 0"):
        cpus.share(range(50), work, 2)
    assert 0 in begun and len(begun) <= 3  # the other thread ends with the piece it has


def test_a_thread_held_back_leaves_its_pieces_to_the_others() -> None:
    done: list[int] = []
    lock = threading.Lock()
    others_done = threading.Event()

    def work(piece: int) -> None:
        if piece == 0:  # held back until every other piece is done, the rest of its run included
            assert others_done.wait(2), "the pieces after 0 in its run waited for it"
        with lock:
            done.append(piece)
            if len(done) == 7 and 0 not in done:
                others_done.set()

    cpus.share(range(8), work, 2)
    assert sorted(done) == list(range(8))
