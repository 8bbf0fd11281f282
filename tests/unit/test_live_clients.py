"""A new SASL pair reaches the live clients and every client made afterwards; a closed one is
dropped; changed certificate files make every client made before them stale. Clients without
`bootstrap.servers` connect nowhere."""

from __future__ import annotations

from topology.live_clients import LiveClients, LiveConsumer, LiveProducer

CONFIG = {"sasl.username": "u", "sasl.password": "old", "log_level": 0}


def test_a_rotated_pair_reaches_live_clients_and_new_ones() -> None:
    clients = LiveClients()
    producer = clients.create(LiveProducer, CONFIG)
    consumer = clients.create(LiveConsumer, CONFIG | {"group.id": "g"})
    consumer.close()
    assert clients.fresh(CONFIG) == CONFIG
    assert clients.rotate("u2", "new") == 1  # the closed consumer cannot take it
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
