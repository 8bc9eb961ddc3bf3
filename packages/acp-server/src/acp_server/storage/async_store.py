"""``AsyncSessionStore``: the session store for trio, on one long-lived worker thread.

It runs any backend of the contract (storage/contract.py) and knows none of them: the
opener (storage/opener.py) picks the backend a configuration names.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final, TypeVar

import msgspec
import trio

from acp_server.model import CompletedTurn
from acp_server.storage.contract import HealthCheckedBackend, SessionBackend
from acp_server.storage.records import (
    DEFAULT_MAX_RESTORED_MESSAGES,
    SessionFenced,
    StoredSession,
    StoredSessionInfo,
    StoreError,
    TurnUnsaved,
    UnknownSession,
)
from acp_server.storage.session_list import SessionPage
from acp_server.storage.spend import SpendEntry, SpendRow, SpendTotals
from acp_server.storage.tokens import PairedToken

logger = logging.getLogger(__name__)

DEFAULT_STORE_THREAD_IDLE_SECS: Final = 30.0
"""How long ``AsyncSessionStore``'s worker thread waits for work before it exits (it is
started again by the next call). Its queue needs no limit of its own: each queued call is a
task awaiting it, and the server bounds its tasks (``DEFAULT_MAX_CONCURRENT_REQUESTS``)."""


DEFAULT_MAX_UNSAVED_TURNS: Final = 64
"""Completed turns of one session held in memory while the store cannot write them (a full
disk, a lock held too long); beyond it a turn is refused as lost (``TurnUnsaved``)."""

DEFAULT_READY_TIMEOUT_SECS: Final = 2.0
"""How long ``ready`` waits for a networked database to answer before saying it is lost."""

T = TypeVar("T")


class _StoreCall:
    """One call handed to the store thread, and its outcome.

    The awaiting task sleeps in ``trio.lowlevel.wait_task_rescheduled`` and the thread wakes
    it with one ``run_sync_soon(reschedule)``: no event or cancel scope to build per call."""

    __slots__ = ("args", "error", "function", "result", "task", "token")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.token = trio.lowlevel.current_trio_token()
        self.task = trio.lowlevel.current_task()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.function(*self.args)
        except BaseException as exc:  # handed back to the awaiting task, re-raised there
            self.error = exc
        try:
            self.token.run_sync_soon(trio.lowlevel.reschedule, self.task)
        except trio.RunFinishedError:
            pass  # the event loop is gone; nobody is waiting any more


class _PingCall:
    """A health ping handed to the store thread. Unlike ``_StoreCall`` its caller may stop
    waiting (it writes nothing), so its end is an event that callers share."""

    __slots__ = ("done", "error", "function", "token")

    def __init__(self, function: Callable[[], object]) -> None:
        self.function = function
        self.token = trio.lowlevel.current_trio_token()
        self.done = trio.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.function()
        except BaseException as exc:  # read by ready(), which reports the store not ready
            self.error = exc
        try:
            self.token.run_sync_soon(self.done.set)
        except trio.RunFinishedError:
            pass  # the event loop is gone; nobody is waiting any more


def _finish_first(raise_cancel: object) -> trio.lowlevel.Abort:
    """A submitted store call is not abandoned: the cancellation waits for its end."""
    return trio.lowlevel.Abort.FAILED


class _StoreThread:
    """A long-lived worker thread that runs store calls one at a time, in order.

    Why not ``trio.to_thread.run_sync`` per call: every completed turn is committed before
    it is answered, so the hop is on each turn's critical path, and handing a call
    to a thread already waiting on a queue skips the generic hop's limiter, context copy and
    thread-cache handoff (in-process: ~45 µs a round trip instead of ~60 µs). The thread
    exits after ``DEFAULT_STORE_THREAD_IDLE_SECS`` without work, or when the store is
    closed, and is started again on demand, so an unclosed store never pins a thread.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_StoreCall | _PingCall | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, call: _StoreCall | _PingCall) -> None:
        with self._lock:
            self._calls.put(call)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="zeroclaw-session-store", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        """Let the thread exit once the calls queued so far are done."""
        self._calls.put(None)

    def _serve(self) -> None:
        calls = self._calls
        while True:
            try:
                call = calls.get(timeout=DEFAULT_STORE_THREAD_IDLE_SECS)
            except queue.Empty:
                call = None
            if call is not None:
                call.run()
                continue
            with self._lock:
                if calls.empty():  # nothing slipped in meanwhile: leave
                    self._thread = None
                    return


class AsyncSessionStore:
    """Runs a session backend (storage/contract.py: SQLite's ``SessionStore``, or
    ``PostgresSessionStore``) on a worker thread, one call at a time (trio); open one with
    ``acp_server.storage.open_store``.

    Calls are not abandoned when the caller is cancelled: a commit that has started finishes
    (or rolls back) before the cancellation is delivered, so a turn is never half written.

    A turn that cannot be written is kept (``DEFAULT_MAX_UNSAVED_TURNS`` per session) and
    written, before the session's next turn and in the same transaction, by the next
    ``append_turn`` that succeeds; a load of the session writes them first, or returns them
    with the stored history when it still cannot. The unsaved turns are only ever touched on
    the worker thread, so they need no lock.
    """

    def __init__(
        self, store: SessionBackend, *, max_unsaved_turns: int = DEFAULT_MAX_UNSAVED_TURNS
    ) -> None:
        self.sync = store
        self._worker = _StoreThread()
        self._unsaved: dict[str, list[CompletedTurn]] = {}
        # The fencing epoch each session's unsaved turns were answered under.
        self._unsaved_epochs: dict[str, int | None] = {}
        self._max_unsaved_turns = max_unsaved_turns
        self._ping: _PingCall | None = None

    async def ready(self, *, timeout_secs: float = DEFAULT_READY_TIMEOUT_SECS) -> bool:
        """Whether the database answers now (``/health``). A backend on a local file always
        does; one over the network is pinged, behind any queued call, and must answer
        within ``timeout_secs``. Callers that ask while a ping is still out share it."""
        backend = self.sync
        if not isinstance(backend, HealthCheckedBackend):
            return True
        ping = self._ping
        if ping is None or ping.done.is_set():
            ping = self._ping = _PingCall(backend.ping)
            self._worker.submit(ping)
        with trio.move_on_after(timeout_secs):
            await ping.done.wait()  # a ping writes nothing: waiting may be abandoned
        if not ping.done.is_set():
            logger.warning("session store not ready: no answer within %.1f s", timeout_secs)
            return False
        if ping.error is not None:
            logger.warning("session store not ready: %s", ping.error)
            return False
        return True

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        await trio.lowlevel.checkpoint_if_cancelled()
        call = _StoreCall(function, args)
        self._worker.submit(call)
        # Once submitted the call runs to its end (see the class docstring): the wait
        # refuses to be aborted, and a cancellation is delivered right after, by the
        # checkpoint below.
        await trio.lowlevel.wait_task_rescheduled(_finish_first)
        if call.error is not None:
            raise call.error
        result: T = call.result
        await trio.lowlevel.checkpoint_if_cancelled()
        return result

    async def create_session(
        self,
        session_id: str,
        agent_alias: str,
        workspace_dir: str,
        *,
        principal: str | None = None,
    ) -> None:
        await self._call(
            partial(self.sync.create_session, principal=principal),
            session_id,
            agent_alias,
            workspace_dir,
        )

    async def session_owned_by(self, session_id: str, principal: str) -> bool:
        return await self._call(self.sync.session_owned_by, session_id, principal)

    async def claim_session(self, session_id: str) -> int | None:
        """The backend's ``claim_session``, after writing the turns this process still keeps
        unsaved for the session (at the epoch they were answered under); any that still
        cannot be written pass to the new epoch, so the claiming copy's load returns them."""
        return await self._call(self._claim, session_id)

    def _claim(self, session_id: str) -> int | None:
        self._write_unsaved(session_id)
        epoch = self.sync.claim_session(session_id)
        if epoch is None:
            self._forget_unsaved(session_id)
        elif session_id in self._unsaved:
            self._unsaved_epochs[session_id] = epoch
        return epoch

    async def current_epoch(self, session_id: str) -> int | None:
        return await self._call(self.sync.current_epoch, session_id)

    async def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        """Write ``turn`` after the session's unsaved turns. Raises ``TurnUnsaved`` when it
        could not be written (kept or lost: see ``TurnUnsaved``), or ``SessionFenced``
        when ``epoch`` no longer holds the session (the unsaved turns are dropped too)."""
        await self._call(self._append_in_order, session_id, turn, epoch)

    async def append_history(self, session_id: str, turns: Sequence[CompletedTurn]) -> None:
        """Write ``turns`` to a session nobody holds yet (a fork's copied history), all in
        one transaction; a failure writes nothing and is raised as the backend's error."""
        await self._call(self.sync.append_turns, session_id, turns)

    def _append_in_order(self, session_id: str, turn: CompletedTurn, epoch: int | None) -> None:
        waiting = self._unsaved.get(session_id, [])
        turns = [*waiting, turn]
        try:
            if waiting:
                self.sync.append_turns(session_id, turns, epoch=epoch)
            elif epoch is None:
                self.sync.append_turn(session_id, turn)
            else:
                self.sync.append_turn(session_id, turn, epoch=epoch)
        except UnknownSession as exc:
            self._forget_unsaved(session_id)
            raise TurnUnsaved(str(exc), kept=False, pending=0) from exc
        except SessionFenced:
            if waiting:
                logger.error(
                    "session %s: %d unsaved turns dropped: the session is open elsewhere",
                    session_id,
                    len(waiting),
                )
            self._forget_unsaved(session_id)
            raise
        except StoreError as exc:
            if len(turns) > self._max_unsaved_turns:
                raise TurnUnsaved(
                    f"{exc}; {len(waiting)} earlier turns are already waiting to be saved",
                    kept=False,
                    pending=len(waiting),
                ) from exc
            self._unsaved[session_id] = turns
            self._unsaved_epochs[session_id] = epoch
            raise TurnUnsaved(str(exc), kept=True, pending=len(turns)) from exc
        if waiting:
            self._forget_unsaved(session_id)
            logger.info("session %s: %d unsaved turns written", session_id, len(waiting))

    def _forget_unsaved(self, session_id: str) -> None:
        self._unsaved.pop(session_id, None)
        self._unsaved_epochs.pop(session_id, None)

    def _write_unsaved(self, session_id: str) -> bool:
        """Try to write the session's unsaved turns; True when none is left (written, or
        dropped because the session is gone or open elsewhere)."""
        waiting = self._unsaved.get(session_id)
        if not waiting:
            return True
        try:
            self.sync.append_turns(session_id, waiting, epoch=self._unsaved_epochs.get(session_id))
        except UnknownSession:
            self._forget_unsaved(session_id)
            return True
        except SessionFenced as exc:
            logger.error("session %s: %d unsaved turns dropped: %s", session_id, len(waiting), exc)
            self._forget_unsaved(session_id)
            return True
        except StoreError as exc:
            logger.warning("session %s: %d turns still unsaved: %s", session_id, len(waiting), exc)
            return False
        self._forget_unsaved(session_id)
        return True

    def _load_with_unsaved(self, session_id: str, max_messages: int | None) -> StoredSession | None:
        self._write_unsaved(session_id)
        stored = self.sync.load_session(session_id, max_messages=max_messages)
        waiting = self._unsaved.get(session_id)
        if stored is None or not waiting:
            return stored
        messages = tuple(message for turn in waiting for message in turn.messages)
        plans = [turn.plan for turn in waiting if turn.plan is not None]
        return msgspec.structs.replace(
            stored,
            messages=stored.messages + messages,
            plan=plans[-1] if plans else stored.plan,
        )

    async def load_session(
        self, session_id: str, *, max_messages: int | None = DEFAULT_MAX_RESTORED_MESSAGES
    ) -> StoredSession | None:
        """The stored session, with any turns still waiting to be saved after its history."""
        return await self._call(self._load_with_unsaved, session_id, max_messages)

    async def touch(self, session_id: str) -> None:
        await self._call(self.sync.touch, session_id)

    async def list_sessions(self) -> list[StoredSessionInfo]:
        return await self._call(self.sync.list_sessions)

    async def list_page(
        self, *, workspace_dir: str | None, cursor: str | None, principal: str | None = None
    ) -> SessionPage:
        return await self._call(
            partial(
                self.sync.list_page,
                workspace_dir=workspace_dir,
                cursor=cursor,
                principal=principal,
            )
        )

    async def set_title(self, session_id: str, title: str) -> bool:
        return await self._call(self.sync.set_title, session_id, title)

    async def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        return await self._call(self.sync.set_additional_dirs, session_id, directories)

    async def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        return await self._call(self.sync.additional_dirs, session_id)

    async def set_config_choices(self, session_id: str, choices: Mapping[str, str]) -> bool:
        return await self._call(self.sync.set_config_choices, session_id, dict(choices))

    async def config_choices(self, session_id: str) -> dict[str, str]:
        return await self._call(self.sync.config_choices, session_id)

    async def delete_session(self, session_id: str) -> bool:
        return await self._call(self._delete, session_id)

    async def record_spend(self, entry: SpendEntry) -> None:
        await self._call(self.sync.record_spend, entry)

    async def spend_totals(
        self, day: str, agent_alias: str, principal: str | None = None
    ) -> SpendTotals:
        return await self._call(self.sync.spend_totals, day, agent_alias, principal)

    async def spend_summary(self, since_day: str) -> list[SpendRow]:
        return await self._call(self.sync.spend_summary, since_day)

    async def import_tokens(self, digests: Sequence[str]) -> int:
        return await self._call(self.sync.import_tokens, list(digests))

    async def add_token(self, digest: str, principal: str, source: str) -> None:
        await self._call(self.sync.add_token, digest, principal, source)

    async def live_tokens(self) -> dict[str, str]:
        return await self._call(self.sync.live_tokens)

    async def list_tokens(self) -> list[PairedToken]:
        return await self._call(self.sync.list_tokens)

    async def revoke_tokens(self, digests: Sequence[str]) -> None:
        await self._call(self.sync.revoke_tokens, list(digests))

    async def record_token_use(self, last_used: Mapping[str, str]) -> None:
        await self._call(self.sync.record_token_use, dict(last_used))

    def _delete(self, session_id: str) -> bool:
        self._forget_unsaved(session_id)
        return self.sync.delete_session(session_id)

    async def aclose(self) -> None:
        """Write what is still unsaved (one last try), then close."""
        try:
            await self._call(self._close)
        finally:
            self._worker.stop()

    def _close(self) -> None:
        for session_id in list(self._unsaved):
            if not self._write_unsaved(session_id):
                logger.error(
                    "session %s: %d completed turns could not be saved and are lost",
                    session_id,
                    len(self._unsaved[session_id]),
                )
        self.sync.close()
