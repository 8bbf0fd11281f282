"""An instance whose advertised URL does not answer several checks in a row is unreachable and
steps aside from the owners' group while another owner answers at its own; it joins again at
its first answer, or when no other owner answers."""

from __future__ import annotations

from adapter.cluster.reach import FAILED_CHECKS, AdvertisedReach
from adapter.metrics import Metrics


class _Probe:
    def __init__(self) -> None:
        self.answers = True

    async def __call__(self) -> bool:
        return self.answers


def _reach(probe: _Probe, others: _Probe | None = None) -> tuple[AdvertisedReach, list[bool]]:
    steps: list[bool] = []
    peers = others or _Probe()
    return AdvertisedReach("http://10.0.0.1:4437", probe, peers, steps.append), steps


async def test_unreachable_after_several_failed_checks_it_steps_aside_then_back() -> None:
    probe = _Probe()
    reach, steps = _reach(probe)
    await reach.check()
    probe.answers = False
    for _ in range(FAILED_CHECKS - 1):
        await reach.check()
    assert (reach.reachable, steps) == (True, [])  # one slow answer is not a verdict
    await reach.check()
    assert (reach.reachable, reach.aside, steps) == (False, True, [True])
    await reach.check()
    assert steps == [True]  # told once
    probe.answers = True
    await reach.check()
    assert (reach.reachable, reach.aside, steps) == (True, False, [True, False])


async def test_it_keeps_or_takes_back_its_slots_while_no_other_owner_answers_either() -> None:
    probe, others = _Probe(), _Probe()
    probe.answers = others.answers = False  # a lone instance, or every address wrong
    reach, steps = _reach(probe, others)
    for _ in range(FAILED_CHECKS + 2):
        await reach.check()
    assert (reach.reachable, reach.aside, steps) == (False, False, [])
    others.answers = True  # another owner can be reached: it takes the slots
    await reach.check()
    assert (reach.aside, steps) == (True, [True])
    others.answers = False  # gone: someone must write the slots
    await reach.check()
    assert (reach.aside, steps) == (False, [True, False])


async def test_the_gauge_says_whether_the_advertised_url_answers() -> None:
    probe = _Probe()
    reach, _ = _reach(probe)
    metrics = Metrics()
    metrics.watch_advertised_reach(lambda: reach.reachable)
    assert metrics.registry.get_sample_value("durable_kafka_advertised_reachable") == 1.0
    probe.answers = False
    for _ in range(FAILED_CHECKS):
        await reach.check()
    assert metrics.registry.get_sample_value("durable_kafka_advertised_reachable") == 0.0
