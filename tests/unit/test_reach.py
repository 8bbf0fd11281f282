"""An instance whose advertised URL does not answer several checks in a row is unreachable and
steps aside from the owners' group, unless no other instance owns a slot; it joins again at the
first answer."""

from __future__ import annotations

from adapter.cluster.reach import FAILED_CHECKS, AdvertisedReach
from adapter.metrics import Metrics


class _Probe:
    def __init__(self) -> None:
        self.answers = True

    async def __call__(self) -> bool:
        return self.answers


def _reach(probe: _Probe, others: bool = True) -> tuple[AdvertisedReach, list[bool]]:
    steps: list[bool] = []
    return AdvertisedReach("http://10.0.0.1:4437", probe, lambda: others, steps.append), steps


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


async def test_a_lone_instance_keeps_its_slots_while_unreachable() -> None:
    probe = _Probe()
    probe.answers = False
    reach, steps = _reach(probe, others=False)
    for _ in range(FAILED_CHECKS + 2):
        await reach.check()
    assert (reach.reachable, reach.aside, steps) == (False, False, [])


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
