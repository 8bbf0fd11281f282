"""A new SASL pair reaches the live clients and every client made afterwards; a closed one is
dropped; changed certificate files make every client made before them stale. Clients without
`bootstrap.servers` connect nowhere."""

from __future__ import annotations

import threading

from topology.live_clients import LiveClients, LiveConsumer, LiveProducer

CONFIG = {"sasl.username": "u", "sasl.password": "old", "log_level": 0}


def test_a_rotated_pair_reaches_live_clients_and_new_ones() -> None:
    clients = LiveClients()
    producer = clients.create(LiveProducer, CONFIG)
    closed = clients.create(LiveProducer, CONFIG)
    closed.close()
    assert clients.fresh(CONFIG) == CONFIG
    assert clients.rotate("u2", "new") == 1  # the closed producer cannot take it
    assert clients.fresh(CONFIG) == CONFIG | {"sasl.username": "u2", "sasl.password": "new"}
    assert clients.fresh({"log_level": 0}) == {"log_level": 0}  # no SASL: left alone
    assert producer.flush(0) == 0


def test_changed_certificate_files_make_the_clients_made_before_stale() -> None:
    clients = LiveClients()
    before = clients.create(LiveConsumer, CONFIG | {"group.id": "g"})
    assert not clients.stale(before)
    clients.renew()
    after = clients.create(LiveConsumer, CONFIG | {"group.id": "g"})
    assert (clients.stale(before), clients.stale(after)) == (True, False)
    before.close()
    after.close()


def test_a_consumer_polled_in_a_loop_takes_the_pair_without_stalling_the_rotation() -> None:
    """The binding makes a second thread wait for a gap between a consumer's calls, and a
    polling loop leaves none: the rotation must not wait for one (it once waited minutes)."""
    clients = LiveClients()
    consumer = clients.create(LiveConsumer, CONFIG | {"group.id": "g"})
    stop, polled = threading.Event(), threading.Event()

    def polling() -> None:
        while not stop.is_set():
            consumer.poll(0.05)
            polled.set()

    loop = threading.Thread(target=polling)
    loop.start()
    rotated = threading.Thread(target=clients.rotate, args=("u2", "new"), daemon=True)
    try:
        rotated.start()
        rotated.join(30)  # a bound on a stall, not a timing: it returns at once when right
        assert not rotated.is_alive()
        for _ in range(2):  # the first may have begun before the offer
            polled.clear()
            assert polled.wait(30)
        assert consumer._taken == ("u2", "new")
    finally:
        stop.set()
        loop.join()
        consumer.close()
