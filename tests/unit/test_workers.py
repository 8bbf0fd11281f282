"""Each worker's identity: its group member id, its forwarding URL, its ops port."""

from __future__ import annotations

from pathlib import Path

from adapter.config import Settings
from adapter.workers import ops_listen, plan, worker_instance_id, worker_url


def test_each_worker_has_an_instance_id_of_its_own_derived_from_the_instance_s() -> None:
    settings = Settings(listen="127.0.0.1:4437")
    assert worker_instance_id(settings, 0) == "http___127.0.0.1_4437.w0"
    assert worker_instance_id(settings, 1) == "http___127.0.0.1_4437.w1"
    assert worker_instance_id(Settings(instance_id="node-a"), 3) == "node-a.w3"
    long = worker_instance_id(Settings(instance_id="x" * 249), 12)
    assert len(long) == 249
    assert long.endswith(".w12")


def test_a_worker_advertises_the_instance_s_host_with_its_own_port() -> None:
    assert worker_url(Settings(listen="127.0.0.1:4437"), 5001) == "http://127.0.0.1:5001"
    advertised = Settings(advertise_url="https://node-a.internal:443")
    assert worker_url(advertised, 5001) == "https://node-a.internal:5001"
    assert worker_url(Settings(listen="[::1]:4437"), 5001) == "http://[::1]:5001"


def test_each_worker_s_ops_listener_is_offset_by_its_index() -> None:
    assert ops_listen(Settings(ops_listen="127.0.0.1:9464"), 0) == "127.0.0.1:9464"
    assert ops_listen(Settings(ops_listen="127.0.0.1:9464"), 2) == "127.0.0.1:9466"
    assert ops_listen(Settings(ops_listen="127.0.0.1:0"), 2) == "127.0.0.1:0"
    assert ops_listen(Settings(ops_listen=""), 1) == ""


def test_the_plan_gives_each_worker_its_own_listeners_and_its_siblings_sockets(
    tmp_path: Path,
) -> None:
    workers = plan(Settings(workers=3), tmp_path)
    try:
        urls = [w.settings.advertised_url for w in workers]
        assert len(set(urls)) == 3
        assert len({w.settings.group_instance_id for w in workers}) == 3
        for worker in workers:
            assert worker.settings.worker_count == 1
            assert worker.settings.listen == "127.0.0.1:4437"  # the shared listener
            assert worker.listeners.reuse_port
            siblings = worker.listeners.siblings
            assert set(siblings) == set(urls) - {worker.settings.advertised_url}
            assert all(Path(path).is_socket() for path in siblings.values())
    finally:
        for worker in workers:
            for sock in (worker.listeners.forward, worker.listeners.unix):
                assert sock is not None
                sock.close()
