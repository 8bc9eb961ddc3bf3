"""A prompt on one connection: ``session/prompt`` (its admission, the turn, the answer),
``session/cancel``, ``$/cancel_request``, the session's title from its first prompt, and
the warning a turn the store could not save carries.

``admit_prompt`` reserves the session's single turn in arrival order (-32000 unknown,
-32002 busy), so a cancel read right after it finds the turn; the job runs the turn
(agent/runtime/turn.py) over a ``TurnChannel`` (presentation/turn_channel.py) and commits
it to the store before answering.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Final

import msgspec
import trio

from acp_core import schema
from acp_core.blobs import plan_prompt
from acp_core.jsonrpc import Payload
from acp_server.agent.io.uploads import write_blobs
from acp_server.agent.runtime.session import Session, Turn
from acp_server.errors import OperationFailed, SessionFenced
from acp_server.model import CompletedTurn
from acp_server.observability.turns import observed_turn
from acp_server.protocol.routes import Job
from acp_server.protocol.services import ownership
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.protocol.services.lifecycle import admit_reaped_restore
from acp_server.storage import TurnUnsaved

# The turn runtime is imported by the prompt that runs it: `zeroclaw acp` answers
# initialize and session/new without loading it (tests/e2e/test_startup_imports.py).

logger = logging.getLogger(__name__)

CANCEL_MARKER: Final = "[turn cancelled via client]"
UNSAVED_TURN_WARNING: Final = "[warning: this turn is not saved"


# ---------------------------------------------------------------------- inline


def cancel(state: ConnectionState, params: schema.SessionIdParams, request_key: str) -> Payload:
    session = state.table.get(params.session_id)
    if session is not None and session.turn is not None:
        session.turn.cancel()
    return schema.EmptyResult()


def cancel_request(
    state: ConnectionState, params: schema.CancelRequestParams, request_key: str
) -> Payload:
    # The client gave up on one of its requests: a running prompt is cancelled (and
    # still answered, with stopReason "cancelled"); anything else is quick.
    turn = state.prompt_turns.get(params.request_key)
    if turn is not None:
        turn.cancel()
    return schema.EmptyResult()


# ---------------------------------------------------------------------- admitted


def admit_prompt(state: ConnectionState, params: schema.PromptParams, request_key: str) -> Job:
    # Reserve the turn now, so a cancel or a second prompt that arrives right after
    # this one sees it (-32002 is decided in arrival order, before any blob write).
    store = state.app.store
    if state.table.was_reaped(params.session_id) and store is not None:
        then = partial(_start_and_run, state, request_key, params)
        return admit_reaped_restore(state, params.session_id, store, then)
    session = state.table.live(params.session_id)
    turn = _start(state, session, request_key)
    return partial(prompt, state, session, turn, request_key, params)


def _start(state: ConnectionState, session: Session, request_key: str) -> Turn:
    """Reserve ``session``'s single turn for the prompt ``request_key`` (-32002 if busy)."""
    turn = state.table.start_turn(session)
    if request_key:
        state.prompt_turns[request_key] = turn
    return turn


async def _start_and_run(
    state: ConnectionState, request_key: str, params: schema.PromptParams, session: Session
) -> Payload:
    turn = _start(state, session, request_key)
    return await prompt(state, session, turn, request_key, params)


def prompt_precedence(state: ConnectionState, raw: msgspec.Raw) -> None:
    """An unknown or busy session outranks a malformed prompt (ZeroClaw's order)."""
    session_id = schema.decode_inbound(schema.SessionIdParams, raw).session_id
    state.table.check_not_prompting(session_id)


# ---------------------------------------------------------------------- the turn


async def prompt(
    state: ConnectionState,
    session: Session,
    turn: Turn,
    request_key: str,
    request: schema.PromptParams,
) -> Payload:
    try:
        with observed_turn(state.app.metrics, session.agent.alias, session.session_id) as seen:
            result = await _run_prompt(state, session, turn, request)
            seen.outcome = result.stop_reason
            return result
    finally:
        session.finish_turn(turn)
        if state.prompt_turns.get(request_key) is turn:
            del state.prompt_turns[request_key]


async def _run_prompt(
    state: ConnectionState, session: Session, turn: Turn, request: schema.PromptParams
) -> schema.PromptResult:
    from acp_server.agent.runtime.turn import run_turn
    from acp_server.protocol.presentation.turn_channel import TurnChannel
    from acp_server.protocol.presentation.usage import prompt_usage
    from acp_server.protocol.services.titles import title_from_prompt

    app, outbound = state.app, state.outbound
    session_id = session.session_id
    await ownership.check_still_held(state.table, app.store, session)
    plan = plan_prompt(request.prompt, uploads_dir=session.uploads_path)
    if plan.writes:
        await trio.to_thread.run_sync(write_blobs, session.workspace, plan.writes)
    if session.title is None:
        # The user's own words only: a resource link or an image names nothing.
        texts = [part.text for part in request.prompt if isinstance(part, schema.TextContent)]
        await name_session(state, session, title_from_prompt(texts))
    io = TurnChannel(outbound, session_id, acp=state.config.acp)
    outcome = None
    with turn.scope:
        outcome = await run_turn(session, plan.text, io)
    if outcome is None:
        partial_text = turn.partial_text
        if outbound.client_profile.cancel_marker_tool_call:
            # Opt-in only: clients draw any tool_call as a tool (acpx prints it, avante
            # stays on "tool calling"); stopReason and content carry the cancel.
            await outbound.send_update(
                session_id, schema.turn_cancelled_update(session_id, CANCEL_MARKER)
            )
        content = f"{partial_text}\n\n{CANCEL_MARKER}" if partial_text else CANCEL_MARKER
        logger.info("session %s: turn cancelled", session_id)
        return schema.PromptResult(session_id=session_id, stop_reason="cancelled", content=content)
    session.history.extend(outcome.messages)
    store = app.store
    if store is not None:
        turn_record = CompletedTurn(
            messages=tuple(outcome.messages), plan=outcome.plan, usage=outcome.usage
        )
        try:
            with app.metrics.timed_store_commit():
                await store.append_turn(session_id, turn_record, epoch=session.epoch)
        except SessionFenced as exc:
            raise ownership.fenced_turn(state.table, session) from exc
        except Exception as exc:
            await _turn_not_saved(state, session_id, exc)
    return schema.PromptResult(
        session_id=session_id,
        stop_reason="end_turn",
        content=outcome.content,
        usage=prompt_usage(outcome.usage),
    )


async def name_session(state: ConnectionState, session: Session, title: str | None) -> None:
    """Give an untitled session ``title``: stored (best effort: the turn goes on if the
    store cannot write it) and announced as ACP ``session_info_update``."""
    if title is None:
        return
    session.title = title
    await _store_title(state, session.session_id, title)
    await state.outbound.send_update(session.session_id, schema.SessionInfoUpdate(title=title))


async def _store_title(state: ConnectionState, session_id: str, title: str) -> None:
    store = state.app.store
    if store is None:
        return
    try:
        await store.set_title(session_id, title)
    except Exception as exc:
        logger.warning("could not store the title of %s: %s", session_id, exc)


async def _turn_not_saved(state: ConnectionState, session_id: str, exc: Exception) -> None:
    """Tell the client its turn is not on disk: a warning streamed in the turn while the
    store keeps it for the next commit; an error when the store could not keep it."""
    if isinstance(exc, TurnUnsaved) and not exc.kept:
        raise OperationFailed("The turn could not be saved and is lost") from exc
    logger.warning("could not persist a turn of session %s: %s", session_id, exc)
    if isinstance(exc, TurnUnsaved):
        warning = (
            f"{UNSAVED_TURN_WARNING}: the session store could not write it; it is kept"
            f" ({exc.pending} unsaved) and written with the next turn that can be saved"
            " (lost if the server stops before the store can write again)]"
        )
    else:
        warning = f"{UNSAVED_TURN_WARNING}: the session store could not write it]"
    chunk = schema.AgentMessageChunk(content=schema.text_block(f"\n\n{warning}"))
    await state.outbound.send_update(session_id, chunk)
