"""Rendering an ACP turn for a person in a terminal (`zeroclaw prompt`, `zeroclaw demo`).

Text streams as it arrives; reasoning is dimmed; each tool call gets a line with its kind
and input, then its status and the first lines of its output; plans are shown as
checklists; permission questions are drawn as a small box with the options.

Everything the agent sends (model text, tool titles and output, plans) and everything a
store holds is passed through ``terminal_safe`` before it is printed: a model must not be
able to retitle the terminal, write the clipboard (OSC 52), move the cursor or overwrite
what was printed (a bare CR) through text it produces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import click

from acp_core.schema import CHOICE_OPTION_PREFIX

DEFAULT_MAX_OUTPUT_LINES: Final = 8
DEFAULT_MAX_LINE_CHARS: Final = 160
_STATUS_MARK: Final = {"completed": "✓", "failed": "✗", "pending": "…", "in_progress": "…"}
_PLAN_MARK: Final = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}

_CONTROL_SEQUENCE: Final = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]                    # CSI: cursor moves, colours, erase
    | (?:\x1b[]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c)
                                        # OSC, DCS, SOS, PM, APC up to ST/BEL (unended:
                                        # only the introducer goes, the text stays seen)
    | \x1b[ -/]*[0-~]?                                 # any other escape
    """,
    re.VERBOSE | re.DOTALL,
)
_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 controls but tab and newline (CR included), DEL, and the C1 controls."""


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control sequence and control character removed
    (ECMA-48: CSI, OSC such as 0 "set title" and 52 "clipboard", DCS, bare ESC, C1), and
    CRLF read as a newline; tabs and newlines stay."""
    text = text.replace("\r\n", "\n")
    return _CONTROL_CHARACTER.sub("", _CONTROL_SEQUENCE.sub("", text))


def terminal_safe_value(value: Any) -> Any:
    """``value`` (parsed JSON) with ``terminal_safe`` applied to every string in it."""
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        return {key: terminal_safe_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [terminal_safe_value(item) for item in value]
    return value


DEFAULT_MIN_SHOWN_PADDING: Final = 8
"""A run of at least this many spaces or tabs in a permission question is drawn as a marker
that counts them, so padding cannot push the rest of a command out of sight."""
_PADDING: Final = re.compile(f"[ \t]{{{DEFAULT_MIN_SHOWN_PADDING},}}")


def _clip(text: str, limit: int = DEFAULT_MAX_LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reveal_padding(text: str) -> str:
    """``ls⟨3000 blanks⟩; rm x`` for a text with long runs of spaces or tabs."""
    return _PADDING.sub(lambda run: f"⟨{len(run.group())} blanks⟩", text)


def tool_input_summary(raw_input: Any) -> str:
    """``ls -la`` for shell, the path for file tools, compact JSON otherwise."""
    if isinstance(raw_input, dict):
        for key in ("command", "path", "pattern", "question", "summary"):
            value = raw_input.get(key)
            if isinstance(value, str):
                return _clip(value)
        shown = {k: v for k, v in raw_input.items() if k != "approved"}
        return _clip(json.dumps(shown, ensure_ascii=False)) if shown else ""
    return ""


class TurnRenderer:
    """Turns ``session/update`` payloads into terminal output.

    Args:
        write: where text goes (``click.echo``-like: text, no newline added).
        color: use ANSI styles.
    """

    def __init__(self, write: Callable[[str], None], *, color: bool) -> None:
        self._write = write
        self._color = color
        self._at_line_start = True
        self._in_thought = False
        self._tools: dict[str, str] = {}
        self._after_block = False  # a tool/plan block was drawn: separate the next text
        self.chunks = 0
        self.tool_calls = 0

    def style(self, text: str, **styles: Any) -> str:
        return click.style(text, **styles) if self._color else text

    def emit(self, text: str) -> None:
        if text:
            self._write(text)
            self._at_line_start = text.endswith("\n")

    def terminal_line_ended(self) -> None:
        """Something else (an interactive prompt) wrote a full line to the terminal."""
        self._at_line_start = True

    def newline(self) -> None:
        if not self._at_line_start:
            self.emit("\n")

    def line(self, text: str) -> None:
        self.newline()
        self.emit(text + "\n")

    def block_line(self, text: str) -> None:
        """A line of a tool or plan block (the next streamed text starts after a gap)."""
        self.line(text)
        self._after_block = True

    def update(self, params: dict[str, Any]) -> None:
        update = terminal_safe_value(params.get("update"))
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._end_thought()
            self.chunks += 1
            text = _text_of(update)
            if self._after_block and text.strip():
                self._after_block = False
                self.line("")
                text = text.lstrip("\n")
            self.emit(text)
        elif kind == "agent_thought_chunk":
            if not self._in_thought:
                self.newline()
                self.emit(self.style("thinking: ", dim=True, italic=True))
                self._in_thought = True
            self.emit(self.style(_text_of(update), dim=True, italic=True))
        elif kind == "tool_call":
            self._end_thought()
            self._tool_started(update)
        elif kind == "tool_call_update":
            self._tool_finished(update)
        elif kind == "plan":
            self._plan(update)

    def _end_thought(self) -> None:
        if self._in_thought:
            self._in_thought = False
            self.line("")

    def _tool_started(self, update: dict[str, Any]) -> None:
        call_id = str(update.get("toolCallId", ""))
        title = str(update.get("title") or update.get("name") or "tool")
        self.tool_calls += 1
        self._tools[call_id] = title
        # A title that names the target (`ls -la`, Read `a.txt`) says it all; a bare tool
        # name (an MCP tool) is followed by its input.
        summary = tool_input_summary(update.get("rawInput"))
        if summary in title:
            summary = ""
        head = self.style(f"⚙ {title}", fg="cyan", bold=True)
        kind = self.style(f"({update.get('kind', 'other')})", dim=True)
        self.block_line(f"{head} {kind} {summary}".rstrip())

    def _tool_finished(self, update: dict[str, Any]) -> None:
        status = str(update.get("status") or "completed")
        output = update.get("rawOutput")
        text = output if isinstance(output, str) else ""
        failed = status == "failed"
        mark = _STATUS_MARK.get(status, "•")
        colour = "red" if failed else "green"
        title = self._tools.get(str(update.get("toolCallId")), str(update.get("title") or "tool"))
        self.block_line(self.style(f"  {mark} {title} {status}", fg=colour))
        lines = text.splitlines()
        for line in lines[:DEFAULT_MAX_OUTPUT_LINES]:
            self.block_line(self.style(f"  │ {_clip(line)}", dim=True))
        if len(lines) > DEFAULT_MAX_OUTPUT_LINES:
            more = len(lines) - DEFAULT_MAX_OUTPUT_LINES
            self.block_line(self.style(f"  │ … {more} more lines", dim=True))
        for block in update.get("content") or []:
            inner = block.get("content") if isinstance(block, dict) else None
            if isinstance(inner, dict) and inner.get("type") == "resource":
                resource = inner.get("resource") or {}
                self.block_line(self.style(f"  ⇩ delivered {resource.get('uri')}", fg="magenta"))

    def _plan(self, update: dict[str, Any]) -> None:
        self.block_line(self.style("plan:", bold=True))
        for entry in update.get("entries") or []:
            mark = _PLAN_MARK.get(str(entry.get("status")), "[ ]")
            self.block_line(f"  {mark} {entry.get('content', '')}")

    def permission_box(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Draw the question; returns the options in display order.

        The question's text is drawn whole, every line of it (what is approved is never
        cut short here), with long runs of blanks counted rather than drawn, and terminal
        control sequences removed."""
        params = terminal_safe_value(params)
        tool_call = params.get("toolCall") or {}
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        title = str(tool_call.get("title") or "a tool call")
        if is_question(options):
            # ask_user: the title is the question and the options are the choices (its
            # content repeats both for clients that do not show option names).
            self.line(self.style(f"? {title}", fg="yellow", bold=True))
            for index, option in enumerate(options, 1):
                self.line(f"  {index}) {option.get('name')}")
            return options
        # An approval's title names the call (`ls -la`, Edit `a.txt`).
        self.line(self.style(f"? Allow {title}?", fg="yellow", bold=True))
        for block in tool_call.get("content") or []:
            inner = block.get("content") if isinstance(block, dict) else None
            if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                for text_line in reveal_padding(inner["text"]).split("\n"):
                    self.line(self.style(f"  {text_line}", dim=True))
            elif isinstance(block, dict) and block.get("type") == "diff":
                self.line(self.style(f"  edit {block.get('path')}", dim=True))
        for index, option in enumerate(options, 1):
            self.line(f"  {index}) {option.get('name')}")
        return options


def is_question(options: list[dict[str, Any]]) -> bool:
    """Whether a permission request's options are ask_user's choices (``choice-N`` ids)."""
    return any(
        str(option.get("optionId", "")).startswith(CHOICE_OPTION_PREFIX) for option in options
    )


def _text_of(update: dict[str, Any]) -> str:
    content = update.get("content")
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return ""
