"""Fencing without a cluster: when a node stops itself, when the driver gives a node up."""

from __future__ import annotations

import os

from agent_fleet.runner._ray_fence import Heartbeats, NodeWatch, poll_interval, raylet_parent


def test_a_lost_raylet_fences_at_once_and_for_good() -> None:
    watch = NodeWatch(10.0, now=0.0)
    assert watch.observe(raylet_alive=True, gcs=True, now=1.0) is None
    reason = watch.observe(raylet_alive=False, gcs=True, now=1.5)
    assert reason is not None and "raylet" in reason
    assert watch.observe(raylet_alive=True, gcs=True, now=2.0) == reason  # no way back


def test_a_silent_gcs_fences_after_the_bound() -> None:
    watch = NodeWatch(10.0, now=0.0)
    assert watch.observe(raylet_alive=True, gcs=True, now=1.0) is None
    assert watch.observe(raylet_alive=True, gcs=None, now=10.9) is None  # 9.9 s of silence
    reason = watch.observe(raylet_alive=True, gcs=None, now=11.1)
    assert reason is not None and "GCS has not answered for 10.1s" in reason
    answered = NodeWatch(10.0, now=0.0)
    for t in range(1, 60):  # an answer now and then keeps it going
        assert answered.observe(raylet_alive=True, gcs=True if t % 9 == 0 else None, now=float(t)) is None


def test_a_node_the_driver_stopped_asking_fences_within_the_bound() -> None:
    watch = NodeWatch(10.0, now=0.0)
    assert watch.observe(raylet_alive=True, gcs=True, now=30.0) is None  # not asked yet: starting
    watch.heard_from_driver(30.0)
    assert watch.observe(raylet_alive=True, gcs=True, now=39.9) is None
    reason = watch.observe(raylet_alive=True, gcs=True, now=40.1)
    assert reason is not None and "driver has not asked for a heartbeat for 10.1s" in reason


def test_the_driver_gives_up_a_node_not_heard_within_the_bound() -> None:
    now = [0.0]
    beats = Heartbeats(10.0, clock=lambda: now[0])
    beats.seen("a")
    beats.seen("b")
    now[0] = 8.0
    beats.seen("b")
    assert beats.overdue() == []
    now[0] = 10.5
    assert beats.overdue() == [("a", 10.5)]
    beats.forget("a")
    now[0] = 18.0
    assert beats.overdue() == []
    now[0] = 18.1
    assert [k for k, _ in beats.overdue()] == ["b"]


def test_poll_interval_sees_a_dead_raylet_quickly_whatever_the_bound() -> None:
    assert poll_interval(10.0) == 2.0
    assert poll_interval(1.0) == 0.2
    assert poll_interval(600.0) == 2.0


def test_outside_ray_there_is_no_raylet_parent() -> None:
    # This test process's parent is not a raylet: only the GCS check would apply.
    assert raylet_parent() is None
    assert os.getppid() > 0
