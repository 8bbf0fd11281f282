"""devstack's process helpers: a zombie is dead, and who listens on a port."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.process import ServiceProcess, _alive, _state, free_port, listening_pids


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _state(pid) != "Z":
        assert time.monotonic() < deadline, f"pid {pid} never became a zombie"
        time.sleep(0.01)


@contextmanager
def orphan_zombie() -> Iterator[int]:
    """A zombie whose parent is alive and never reaps it (as under a PID 1 that reaps nothing):
    not our child, so waitpid cannot reap it. Its parent reaps it when we let it go."""
    pid_pipe, release_pipe = os.pipe(), os.pipe()
    parent = os.fork()
    if parent == 0:  # the careless parent
        zombie = os.fork()
        if zombie == 0:
            os._exit(0)
        os.write(pid_pipe[1], str(zombie).encode())
        os.read(release_pipe[0], 1)
        os.waitpid(zombie, 0)
        os._exit(0)
    try:
        zombie = int(os.read(pid_pipe[0], 32))
        _wait_for_zombie(zombie)
        yield zombie
    finally:
        os.write(release_pipe[1], b"x")
        os.waitpid(parent, 0)
        for fd in (*pid_pipe, *release_pipe):
            os.close(fd)


def test_a_running_process_is_alive() -> None:
    assert _state(os.getpid()) in ("R", "S")
    assert _alive(os.getpid())


def test_an_unreaped_child_of_ours_is_dead_and_reaped() -> None:
    child = os.fork()
    if child == 0:
        os._exit(0)
    _wait_for_zombie(child)
    assert not _alive(child)
    # /proc may show the child a zombie a moment before the kernel lets it be waited for (a
    # full run saw 'Z' after the check): a later check reaps it then.
    for _ in range(200):
        if _state(child) is None:
            break
        assert not _alive(child)
        time.sleep(0.01)
    assert _state(child) is None  # reaped by the check


def test_a_zombie_nobody_reaps_is_dead() -> None:
    with orphan_zombie() as zombie:
        os.kill(zombie, 0)  # it still answers kill(0): what used to pass for alive
        assert not _alive(zombie)


def test_a_pid_file_naming_a_zombie_is_stale(tmp_path: Path) -> None:
    service = ServiceProcess("adapter", tmp_path)
    with orphan_zombie() as zombie:
        service.pid_file.write_text(str(zombie))
        assert service.pid() is None
    assert not service.pid_file.exists()


def test_the_listening_pid_is_found() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert listening_pids(listener.getsockname()[1]) == {os.getpid()}


def test_the_listening_pid_is_found_while_another_thread_opens_and_closes_files() -> None:
    """An fd closed between listing a process's fds and reading one must not hide the process
    (the test process's own threads do so all the time)."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for fd in [os.open(os.devnull, os.O_RDONLY) for _ in range(50)]:
                os.close(fd)

    churning = threading.Thread(target=churn)
    churning.start()
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            found = [listening_pids(port) for _ in range(100)]
    finally:
        stop.set()
        churning.join()
    assert all(pids == {os.getpid()} for pids in found)


def test_a_bound_socket_is_not_a_listener() -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening
        assert listening_pids(bound.getsockname()[1]) == set()
    assert listening_pids(free_port()) == set()


def test_a_free_port_is_never_one_a_port_0_listener_can_take() -> None:
    """The race a port from `bind(0)` had: handed out, let go, then taken by the next listener
    on port 0 (an ops listener) before the service it was for could listen on it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < low for port in ports)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports[-1]))  # free to listen on
