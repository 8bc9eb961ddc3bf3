"""Messages websockets has already received, taken without a trip through the scheduler.

This is the one place the bridge reads websockets' private attributes (of the trio
``ClientConnection`` and its ``Assembler``). ``tests/bridge/test_relay_ready_messages.py``
checks on the installed version that they are still there and behave as assumed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

import trio
from websockets.frames import Opcode
from websockets.trio.client import ClientConnection

ReadyMessageTaker = Callable[[], bytes | None]

_MESSAGE_OPCODES: Final = frozenset({Opcode.TEXT, Opcode.BINARY})


def ready_message_taker(websocket: ClientConnection) -> ReadyMessageTaker | None:
    """A function returning the next message websockets has already received, or None;
    None instead of the function when this websockets version's internals are not the ones
    it was written for (then ``recv()`` alone has to do).

    ``recv()`` costs a trip through the trio scheduler per message even when the message is
    waiting (the channel's receive always yields); with small session/update frames that
    trip was half the relay's time. This takes a waiting single-frame message straight
    from websockets' trio ``Assembler`` queue, as ``Assembler.get`` would (including its
    flow control, ``maybe_resume``), and leaves everything else to ``recv()``: fragmented
    messages, an empty queue, a ``recv()`` in progress. It reads the queue the way
    websockets' own flow control does (``send_frames._state.data``).
    """
    assembler = getattr(websocket, "recv_messages", None)
    receive = getattr(assembler, "recv_frames", None)
    state = getattr(getattr(assembler, "send_frames", None), "_state", None)
    waiting = getattr(state, "data", None)
    resume = getattr(assembler, "maybe_resume", None)
    if (
        assembler is None
        or not hasattr(assembler, "get_in_progress")
        or not isinstance(receive, trio.MemoryReceiveChannel)
        or not isinstance(waiting, deque)
        or not callable(resume)
    ):
        return None

    def take() -> bytes | None:
        if not waiting or assembler.get_in_progress:
            return None
        head = waiting[0]
        if not head.fin or head.opcode not in _MESSAGE_OPCODES:
            return None
        try:
            frame = receive.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return None
        resume()
        return bytes(frame.data)

    return take


def nothing_ready() -> bytes | None:
    """The taker to use when ``ready_message_taker`` is not available."""
    return None
