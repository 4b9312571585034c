"""tickgate.aio on a real asyncio loop: the reader, awaitables, the gate."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Awaitable, Callable, List

import pytest

import tickgate
from tickgate import EventKind, _engine
from tickgate.aio import AsyncEngine, open_engine


def run(coro_fn: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())


async def _advance_soon(engine: AsyncEngine, steps: List[int], pause: float = 0.005) -> None:
    for ms in steps:
        await asyncio.sleep(pause)
        engine.advance(ms=ms)


def test_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        AsyncEngine(clock="manual")
    with pytest.raises(TypeError):
        asyncio.run(_open_with_delivery())


async def _open_with_delivery() -> None:
    AsyncEngine(delivery="thread")  # type: ignore[call-arg]


def test_callbacks_run_on_the_loop_thread() -> None:
    async def main() -> List[int]:
        threads: List[int] = []
        got = asyncio.Event()
        async with AsyncEngine(clock="manual") as engine:
            assert engine.delivery is tickgate.Delivery.HOST_THREAD

            def on_event(event: tickgate.Event) -> None:
                threads.append(threading.get_ident())
                if event.kind == EventKind.TICK:
                    got.set()

            engine.subscribe("s", "k", on_event)
            engine.start("s", "k", 3)
            asyncio.ensure_future(_advance_soon(engine, [1000]))
            await got.wait()  # nobody calls dispatch: the reader does
        return threads

    threads = run(main)
    assert len(threads) == 3 and set(threads) == {threading.get_ident()}


def test_event_stream_manual_clock() -> None:
    async def main() -> List[tuple]:
        async with open_engine(clock="manual") as engine:
            engine.start("login", "p", 3)
            driver = asyncio.ensure_future(_advance_soon(engine, [1000, 1000, 1000]))
            got = []
            async with engine.events("login", "p", until_idle=True) as events:
                async for event in events:
                    got.append((event.kind, event.display_seconds, event.title))
            await driver
            return got

    assert run(main) == [
        (EventKind.STATE, 3, "Resend (3s)"),
        (EventKind.TICK, 2, "Resend (2s)"),
        (EventKind.TICK, 1, "Resend (1s)"),
        (EventKind.FINISHED, 0, "Get code"),
    ]
    assert _engine.live_slots() == 0


def test_event_stream_break_unsubscribes() -> None:
    async def main() -> None:
        async with AsyncEngine(clock="manual") as engine:
            async with engine.events("s", "k") as events:
                async for event in events:
                    assert event.kind == EventKind.STATE
                    break
                assert events.subscription.active
            assert not events.subscription.active
            assert _engine.live_slots() == 0

    run(main)


def test_event_stream_of_a_scope_ends_when_the_engine_closes() -> None:
    async def main() -> List[str]:
        engine = AsyncEngine(clock="manual")
        engine.start("s", "a", 5)
        subjects = []

        async def consume() -> None:
            async for event in engine.events("s", None):
                subjects.append(event.subject)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        engine.start("s", "b", 5)
        await asyncio.sleep(0.05)
        engine.close()
        await task  # iteration ends: no hang, no error
        return subjects

    assert run(main) == ["a", "b"]


def test_wait_ready_idle_returns_at_once() -> None:
    async def main() -> Any:
        async with AsyncEngine(clock="manual") as engine:
            return await engine.wait_ready("s", "k")

    assert run(main) is None


def test_wait_ready_until_finished() -> None:
    async def main() -> tickgate.Event:
        async with AsyncEngine(clock="manual") as engine:
            engine.start("s", "k", 2)
            asyncio.ensure_future(_advance_soon(engine, [1000, 1000]))
            event = await engine.wait_ready("s", "k")
            assert not engine.is_counting("s", "k")
            return event

    event = run(main)
    assert event.kind == EventKind.FINISHED and event.remaining_ms == 0
    assert _engine.live_slots() == 0


def test_wait_ready_until_cancelled_and_across_a_restart() -> None:
    async def main() -> tickgate.Event:
        async with AsyncEngine(clock="manual") as engine:
            engine.start("s", "k", 60)

            async def later() -> None:
                await asyncio.sleep(0.02)
                engine.start("s", "k", 30, restart=True)  # still counting: keep waiting
                await asyncio.sleep(0.02)
                engine.cancel("s", "k")

            asyncio.ensure_future(later())
            return await engine.wait_ready("s", "k")

    assert run(main).kind == EventKind.CANCELLED


def test_wait_ready_raises_closed_when_the_engine_closes() -> None:
    async def main() -> None:
        engine = AsyncEngine(clock="manual")
        engine.start("s", "k", 60)
        waiter = asyncio.ensure_future(engine.wait_ready("s", "k"))
        await asyncio.sleep(0.02)
        engine.close()
        with pytest.raises(tickgate.Closed):
            await waiter

    run(main)


def test_cancelled_wait_unsubscribes() -> None:
    async def main() -> None:
        async with AsyncEngine(clock="manual") as engine:
            engine.start("s", "k", 60)
            waiter = asyncio.ensure_future(engine.wait_ready("s", "k"))
            await asyncio.sleep(0.02)
            assert _engine.live_slots() == 1
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert _engine.live_slots() == 0

    run(main)


def test_real_clock_short_countdown() -> None:
    async def main() -> List[tickgate.Event]:
        async with AsyncEngine(tick_interval=0.1) as engine:
            engine.start("login", "p", 0.3)
            events = []
            async with engine.events("login", "p", until_idle=True) as stream:
                async for event in stream:
                    events.append(event)
            assert await engine.wait_ready("login", "p") is None
            return events

    events = run(main)
    assert events[0].kind == EventKind.STATE and events[-1].kind == EventKind.FINISHED
    assert all(e.kind == EventKind.TICK for e in events[1:-1])


def test_reader_is_removed_before_close() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        engine = AsyncEngine(clock="manual")
        fd = engine.fileno()
        engine.close()
        assert loop.remove_reader(fd) is False  # nothing registered any more
        engine.close()

    run(main)


def test_exception_in_a_callback_does_not_break_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="tickgate")

    async def main() -> tickgate.Event:
        async with AsyncEngine(clock="manual") as engine:
            engine.subscribe("s", "k", lambda e: 1 / 0)
            engine.start("s", "k", 1)
            asyncio.ensure_future(_advance_soon(engine, [1000]))
            return await engine.wait_ready("s", "k")

    assert run(main).kind == EventKind.FINISHED
    assert any(isinstance(r.exc_info[1], ZeroDivisionError) for r in caplog.records if r.exc_info)


def test_unreferenced_async_engine_is_collected() -> None:
    async def main() -> None:
        import gc
        import weakref

        engine = AsyncEngine(clock="manual")
        ref = weakref.ref(engine)
        del engine
        gc.collect()
        assert ref() is None  # the reader does not keep it alive

    run(main)


# ---------------------------------------------------------------------------
# The login gate
# ---------------------------------------------------------------------------


def test_gate_require_runs_now_without_login() -> None:
    async def main() -> tickgate.GateRequest:
        async with AsyncEngine(clock="manual") as engine:
            return await engine.gate("account").require(needs_login=False)

    request = run(main)
    assert request.result is tickgate.RequireResult.RUNS_NOW and request.outcome == "ran"


def test_gate_require_waits_for_login() -> None:
    async def main() -> List[str]:
        order: List[str] = []
        async with AsyncEngine(clock="manual") as engine:
            gate = engine.gate("account")

            async def buy() -> None:
                await gate.require(action=lambda: order.append("action"))
                order.append("after await")

            task = asyncio.ensure_future(buy())
            async with gate.events() as events:
                async for event in events:
                    if event.kind == tickgate.GateEventKind.LOGIN_REQUIRED:
                        order.append("login screen")
                        gate.login_succeeded(600)
                        break
            await task
            assert gate.session().logged_in
        return order

    assert run(main) == ["login screen", "action", "after await"]


def test_gate_require_raises_when_login_is_cancelled() -> None:
    async def main() -> None:
        async with AsyncEngine(clock="manual") as engine:
            gate = engine.gate("account")
            task = asyncio.ensure_future(gate.require())
            await asyncio.sleep(0.02)
            gate.login_cancelled()
            with pytest.raises(tickgate.RequestCancelled) as info:
                await task
            assert info.value.reason is tickgate.CancelReason.LOGIN_CANCELLED

    run(main)


def test_gate_require_coalesced_requests_resolve_together() -> None:
    async def main() -> List[tickgate.GateRequest]:
        async with AsyncEngine(clock="manual") as engine:
            gate = engine.gate("account")
            tasks = [asyncio.ensure_future(gate.require(coalesce_key="pay")) for _ in range(3)]
            await asyncio.sleep(0.02)
            gate.login_succeeded()
            return list(await asyncio.gather(*tasks))

    requests = run(main)
    assert [r.result for r in requests] == [tickgate.RequireResult.QUEUED] + [tickgate.RequireResult.COALESCED] * 2
    assert len({r.id for r in requests}) == 1


def test_gate_cancelled_task_withdraws_its_request() -> None:
    async def main() -> None:
        async with AsyncEngine(clock="manual") as engine:
            gate = engine.gate("account")
            task = asyncio.ensure_future(gate.require())
            await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.02)
            assert _engine.live_slots() == 0  # withdrawn: its destructor ran
            gate.login_succeeded()  # nothing left to run

    run(main)


def test_gate_require_raises_closed_when_the_engine_closes() -> None:
    async def main() -> None:
        engine = AsyncEngine(clock="manual")
        task = asyncio.ensure_future(engine.gate("account").require())
        await asyncio.sleep(0.02)
        engine.close()
        with pytest.raises(tickgate.Closed):
            await task

    run(main)
