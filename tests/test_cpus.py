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
    done: list[int] = []
    cpus.share(range(6), done.append, 3)
    assert done == list(range(6))


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
