"""The shell command classifier: allowlist, risk class and jail checks of one command line.

Pure analysis of the command's words (plus the glob and ``lexists`` look-ups that judge which
words name workspace paths); ``SecurityPolicy.decide`` turns the result into an approval.

Command risk classes (``assess_command``; the highest class of any command in a pipeline,
list or subshell wins):

======  ==================================================================================
HIGH    rm, sudo/su/doas, chmod/chown/chgrp, curl/wget, ssh/scp/sftp/rsync, nc/ncat/telnet,
        dd, mkfs*, fdisk, mount, shutdown/reboot/halt/poweroff, kill/pkill/killall,
        systemctl, crontab; shells and command runners (sh, bash, eval, exec, env, xargs,
        nohup, timeout, time, make, npx, …) because they hide the real command;
        interpreters given code inline or on stdin (``python3 -c``, ``node -e``,
        ``perl -e``, awk); package managers running project scripts or installing
        (``npm test/run/start/install``, ``pip install``, ``cargo run/build/install``, any
        ``yarn <script>``); git's program-running options (``git -c``, ``git grep -O``,
        ``--upload-pack``, ``--ext-diff``, ``git config`` writes, ``rebase -x``, …);
        changes to the machine (``date -s``, ``hostname NAME``, sysctl, ip, …);
        ``find -exec/-delete``; environment assignments that name programs or move their
        configuration (``LD_*``, ``GIT_*``, ``PATH``, ``PAGER``, ``HOME``, …); output
        redirection outside the workspace (only reachable when the jail is lifted).
        Per program: ``security/programs.py``.
MEDIUM  git commit/push/reset/checkout/rebase/merge/… (every git subcommand that is not
        read-only), npm/pnpm/yarn uninstall/remove, pip uninstall, cargo add/remove/…,
        touch/mkdir/mv/cp/ln/tee/rmdir/truncate, ``sed -i``, output redirection into the
        workspace (``> /dev/null`` is fine).
LOW     everything else that passed the allowlist.
======  ==================================================================================

Refused outright (DENY, whatever the level): command substitution (``$(…)``, backticks,
``<(…)``), ``$'…'`` quoting, ``${…}`` with operators, unbalanced quotes, a program not in
``allowed_commands`` (``"*"`` allows any), and path arguments, ``NAME=value`` values or
redirection targets that leave the jail or touch a forbidden path, judged after the
variable, brace, tilde and glob expansion bash would do. Words are read as bash reads them:
a backslash-newline joins the words around it, only blanks and newlines separate words,
and ``~`` / ``~+`` / ``~user`` expand (``~-`` and the directory-stack forms ``~N`` are
refused: they depend on shell state). Options that follow symbolic links while walking a
tree (``grep -R``, ``find -L``, ``rg -L``, ``ls -RL``, ``cp -rL``, ``du -L``, ``tar -h``)
are refused while the workspace holds a link that leads out of it.
The shell check is a policy gate, not a sandbox: it sees the words of the command, not what
the programs do with them; OS-level confinement is out of scope here.
"""

from __future__ import annotations

import enum
import glob
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

from acp_server.config import RiskProfileConfig
from acp_server.patterns import LazyPattern
from acp_server.security.paths import PathJail, PolicyViolation
from acp_server.security.programs import (
    classify_program,
    dangerous_assignment,
    follows_links_recursively,
)

DEFAULT_MAX_COMMAND_CHARS: Final = 64 * 1024
"""A shell command longer than this is refused (it is typed by a model, not data)."""
DEFAULT_MAX_EXPANSIONS: Final = 1000
"""Brace alternatives or glob matches of one shell word checked against the jail; a word
that expands to more is refused rather than half-checked."""

DEFAULT_MAX_LINK_SCAN_ENTRIES: Final = 100_000
"""Directory entries looked at when a command follows symbolic links through the tree; a
bigger workspace is refused for such a command rather than half-checked."""

# Environment variables the shell tool passes through to commands. Everything else
# (API keys above all) is withheld, so `env` or `echo $OPENROUTER_API_KEY` cannot leak
# secrets into the conversation (ZeroClaw's implementation clears the environment the same way).
SHELL_ENV_PASSTHROUGH: Final = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "TERM", "TZ", "TMPDIR",
)  # fmt: skip

# Shell reserved words that may precede a command in a list (`if x; then y; fi`).
_RESERVED_WORDS: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!"}
)
_SUBSTITUTION_REASON: Final = (
    "Command substitution ($(...), `...`, <(...)) is not allowed by security policy; "
    "run the inner command on its own first"
)
_ENV_ASSIGNMENT: Final = LazyPattern(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ENV_REFERENCE: Final = LazyPattern(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_REDIRECT_CHARS: Final = "<>&|"
_BRACES: Final = LazyPattern(r"\{([^{}]*,[^{}]*)\}")  # an innermost group with a comma


class CommandRisk(enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


RISK_ORDER: Final = {CommandRisk.LOW: 0, CommandRisk.MEDIUM: 1, CommandRisk.HIGH: 2}


class CommandAssessment(msgspec.Struct, frozen=True):
    """What ``assess_command`` found out about a shell command.

    ``denial`` is set when the command must be refused whatever the approval;
    ``blocked_high_risk`` lists the HIGH findings that ``block_high_risk_commands`` blocks
    (those not explicitly allowlisted); ``reasons`` explains every MEDIUM/HIGH finding.
    """

    risk: CommandRisk
    programs: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    blocked_high_risk: tuple[str, ...] = ()
    denial: str | None = None


def shell_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment shell commands run with: ``SHELL_ENV_PASSTHROUGH`` only."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in SHELL_ENV_PASSTHROUGH if name in source}


class _CommandParseError(ValueError):
    pass


class CommandClassifier:
    """Judges shell commands for one session.

    Args:
        profile: the agent's risk profile (``allowed_commands``, ``block_high_risk_commands``).
        jail: the session's path jail; path arguments and redirections are checked against it.
    """

    def __init__(self, profile: RiskProfileConfig, jail: PathJail) -> None:
        self.profile = profile
        self.workspace = jail.workspace
        self._jail = jail
        self._shell_env = shell_environment()

    def classify_command(self, command: str) -> CommandRisk:
        """The command's risk class; a command that cannot be analysed counts as HIGH."""
        assessment = self.assess_command(command)
        return CommandRisk.HIGH if assessment.denial is not None else assessment.risk

    def assess_command(self, command: str) -> CommandAssessment:
        """Analyse a shell command against the allowlist, the risk classes and the jail."""
        if not command.strip():
            return CommandAssessment(CommandRisk.LOW, denial="Command is empty")
        if len(command) > DEFAULT_MAX_COMMAND_CHARS:
            return CommandAssessment(
                CommandRisk.HIGH,
                denial=f"Command is too long ({len(command)} characters, "
                f"limit {DEFAULT_MAX_COMMAND_CHARS})",
            )
        try:
            word_lists = command_words(command)
        except ValueError as exc:
            return CommandAssessment(CommandRisk.HIGH, denial=str(exc))
        risk = CommandRisk.LOW
        programs: list[str] = []
        reasons: list[str] = []
        blocked: list[str] = []
        variables: dict[str, str] = {}  # NAME=value assignments seen so far in this line
        for words in word_lists:
            finding = self._assess_simple_command(words, variables)
            if finding.denial is not None:
                return finding
            programs.extend(finding.programs)
            reasons.extend(finding.reasons)
            blocked.extend(finding.blocked_high_risk)
            if RISK_ORDER[finding.risk] > RISK_ORDER[risk]:
                risk = finding.risk
        return CommandAssessment(
            risk,
            programs=tuple(programs),
            reasons=tuple(reasons),
            blocked_high_risk=tuple(blocked) if self.profile.block_high_risk_commands else (),
        )

    def _assess_simple_command(
        self, words: list[str], variables: dict[str, str]
    ) -> CommandAssessment:
        high: list[str] = []
        high_blockable: list[str] = []
        medium: list[str] = []
        args: list[str] = []
        index = 0
        # Redirections first: they can appear anywhere in a simple command.
        while index < len(words):
            word = words[index]
            if word and all(char in _REDIRECT_CHARS for char in word):
                target = words[index + 1] if index + 1 < len(words) else ""
                try:
                    expanded = self._expand_tilde(self._expand_env(target, variables), variables)
                except _CommandParseError as exc:
                    return CommandAssessment(CommandRisk.HIGH, denial=str(exc))
                denial = self._check_redirection(word, expanded, high, high_blockable, medium)
                if denial is not None:
                    return CommandAssessment(CommandRisk.HIGH, denial=denial)
                index += 2
                continue
            args.append(word)
            index += 1
        # Leading reserved words and environment assignments precede the program.
        while args and (args[0] in _RESERVED_WORDS or _ENV_ASSIGNMENT.match(args[0])):
            word = args.pop(0)
            if word in _RESERVED_WORDS:
                continue
            name, value = word.split("=", 1)
            # The value may be a path used later as $NAME: check it like an argument.
            denial = self._check_path_argument(value, variables, assignment=True)
            if denial is not None:
                return CommandAssessment(CommandRisk.HIGH, denial=denial)
            variables[name] = ":".join(
                self._expand_tilde(piece, variables)
                for piece in self._expand_env(value, variables).split(":")
            )
            if dangerous_assignment(name):
                finding = f"sets {name}"
                high.append(finding)
                high_blockable.append(finding)
        if not args:
            return self._finding(high, high_blockable, medium, programs=())
        program, arguments = args[0], args[1:]
        denial = self._check_program_allowed(program)
        if denial is not None:
            return CommandAssessment(CommandRisk.HIGH, denial=denial)
        for argument in arguments:
            denial = self._check_path_argument(argument, variables)
            if denial is not None:
                return CommandAssessment(CommandRisk.HIGH, denial=denial)
        follow = follows_links_recursively(program, arguments)
        if follow is not None:
            denial = self._check_followed_links(follow)
            if denial is not None:
                return CommandAssessment(CommandRisk.HIGH, denial=denial)
        found = classify_program(program, arguments, self.profile.allowed_commands)
        high.extend(found.high)
        high_blockable.extend(found.blockable)
        medium.extend(found.medium)
        return self._finding(high, high_blockable, medium, programs=(program,))

    @staticmethod
    def _finding(
        high: list[str], high_blockable: list[str], medium: list[str], *, programs: tuple[str, ...]
    ) -> CommandAssessment:
        if high:
            risk = CommandRisk.HIGH
        elif medium:
            risk = CommandRisk.MEDIUM
        else:
            risk = CommandRisk.LOW
        return CommandAssessment(
            risk,
            programs=programs,
            reasons=tuple(high + medium),
            blocked_high_risk=tuple(high_blockable),
        )

    def _check_program_allowed(self, program: str) -> str | None:
        allowed = self.profile.allowed_commands
        if "*" in allowed or program in allowed:
            return None
        if "/" in program and os.path.basename(program) in allowed:
            return (
                f"Command '{program}' is not allowed by security policy: call it by its bare "
                f"name '{os.path.basename(program)}' or add the full path to allowed_commands"
            )
        shown = ", ".join(allowed) if allowed else "(none)"
        return f"Command '{program}' is not allowed by security policy (allowed_commands: {shown})"

    def _expand_env(self, word: str, variables: Mapping[str, str]) -> str:
        """``$NAME`` / ``${NAME}`` as the shell will see them: variables assigned earlier in
        the line, then the shell's environment, else empty (as bash expands unset names)."""
        if "$" not in word:
            return word

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return variables.get(name, self._shell_env.get(name, ""))

        return _ENV_REFERENCE.sub(substitute, word)

    def _check_path_argument(
        self, argument: str, variables: Mapping[str, str], *, assignment: bool = False
    ) -> str | None:
        """Refuse an argument that names a path outside the jail or a forbidden path.

        The word is looked at as the shell will expand it: variables, brace alternatives,
        tilde prefixes and glob matches in the workspace (a ``*`` may match a symlink
        leading out). Checked: anything path-like (absolute, ``~``, containing ``..``), the
        value of ``--option=value``, and any word naming an existing workspace entry. bash
        also expands a tilde after the ``=`` of a ``name=value`` word and after each ``:``
        of an assignment's value (``PATH=~/bin:~+/x``): those pieces are checked too.
        """
        candidates = [argument]
        if "=" in argument:
            value = argument.split("=", 1)[1]
            if argument.startswith("-") or value.startswith("~"):
                candidates.append(value)
        if assignment or "=" in argument:
            candidates.extend(
                piece for piece in candidates[-1].split(":")[1:] if piece.startswith("~")
            )
        for raw in candidates:
            value = self._expand_env(raw, variables)
            if "${" in value:
                return (
                    f"Parameter expansion with operators is not allowed by security policy: "
                    f"{raw}; use plain $NAME"
                )
            words = expand_braces(value)
            if len(words) > DEFAULT_MAX_EXPANSIONS:
                return f"Brace expansion is too large to check: {raw}"
            for word in words:
                try:
                    expanded = self._expand_tilde(word, variables)
                except _CommandParseError as exc:
                    return str(exc)
                denial = self._check_expanded_word(expanded)
                if denial is not None:
                    return denial
        return None

    def _expand_tilde(self, word: str, variables: Mapping[str, str]) -> str:
        """A leading tilde prefix as bash expands it: ``~`` is ``$HOME``, ``~+`` the working
        directory (the workspace unless ``PWD`` was set earlier in the line), ``~user``
        that user's home. ``~-`` (the previous directory) and ``~N`` / ``~+N`` / ``~-N``
        (the directory stack) depend on state the classifier does not track: refused."""
        if not word.startswith("~"):
            return word
        prefix, slash, rest = word.partition("/")
        name = prefix[1:]
        if name == "":
            home = variables.get("HOME") or self._shell_env.get("HOME")
            base = home if home else os.path.expanduser("~")
        elif name == "+":
            base = variables.get("PWD") or str(self.workspace)
        elif name == "-" or name.lstrip("+-").isdigit():
            raise _CommandParseError(
                f"The tilde form {prefix} (a previous or stacked directory) is not allowed by "
                "security policy; spell the path out"
            )
        else:
            base = os.path.expanduser(prefix)  # ~user; an unknown user stays literal
        return base + slash + rest

    def _check_followed_links(self, option: str) -> str | None:
        """Refuse an option that follows symbolic links while walking a tree when the
        workspace holds a link leading out of the jail (or to a forbidden path)."""
        link, complete = self._jail.first_escaping_link(DEFAULT_MAX_LINK_SCAN_ENTRIES)
        if link is not None:
            shown = os.path.relpath(link, self.workspace)
            return (
                f"'{option}' follows symbolic links, and the workspace has one that leads "
                f"outside it: {shown} -> {os.readlink(link)}; not allowed by security policy"
            )
        if not complete:
            return (
                f"'{option}' follows symbolic links, and the workspace is too large to check "
                f"for links leading outside it (over {DEFAULT_MAX_LINK_SCAN_ENTRIES} entries)"
            )
        return None

    def _check_expanded_word(self, word: str) -> str | None:
        if not word or "\x00" in word:
            return None
        paths = [word]
        if any(char in word for char in "*?["):
            pattern = os.path.expanduser(word)
            matches = glob.glob(
                pattern, root_dir=None if os.path.isabs(pattern) else self.workspace
            )
            if len(matches) > DEFAULT_MAX_EXPANSIONS:
                return f"Glob matches too many paths to check: {word}"
            paths.extend(matches)
        for path in paths:
            path_like = path.startswith(("/", "~")) or ".." in Path(path).parts
            if not path_like:
                try:
                    path_like = os.path.lexists(self.workspace / path)
                except (OSError, ValueError):
                    path_like = False
            if not path_like:
                continue
            try:
                self._jail.resolve_path(path)
            except PolicyViolation as violation:
                return str(violation)
        return None

    def _check_redirection(
        self,
        operator: str,
        target: str,
        high: list[str],
        blockable: list[str],
        medium: list[str],
    ) -> str | None:
        if not target:
            return f"Redirection '{operator}' has no target"
        if operator.startswith("<<"):
            return None  # here-document / here-string: the target is text, not a path
        if operator.endswith("&") and (target.isdigit() or target == "-"):
            return None  # file-descriptor duplication such as 2>&1
        if target == "/dev/null":
            return None
        writes = ">" in operator
        try:
            resolved = self._jail.resolve_path(target, for_write=writes)
        except PolicyViolation as violation:
            return str(violation)
        if writes:
            if self._jail.is_inside(resolved):
                medium.append(f"output redirection to {target}")
            else:
                finding = f"output redirection outside the workspace ({target})"
                high.append(finding)
                blockable.append(finding)
        return None


def expand_braces(pattern: str) -> list[str]:
    """Bash-style brace alternatives: ``a{b,c}d`` → ``abd``, ``acd`` (nested, unbounded:
    callers cap the result). A brace group without a comma stays literal, as in bash."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    expanded: list[str] = []
    for option in match.group(1).split(","):
        expanded.extend(expand_braces(head + option + tail))
        if len(expanded) > DEFAULT_MAX_EXPANSIONS:
            break
    return expanded


def command_words(command: str) -> list[list[str]]:
    """The words of each simple command of a command line, unquoted as bash reads them
    before expansions (line continuations joined, quotes removed). ``ValueError`` says
    why a line cannot be analysed (command substitution, an unterminated quote, …)."""
    return [_split_words(segment) for segment in _split_command_list(command)]


def _split_command_list(command: str) -> list[str]:
    """Split a command line into simple commands on unquoted control operators.

    Separators: ``;`` ``&`` ``&&`` ``|`` ``||`` ``|&`` newlines, and ``(`` ``)`` of
    subshells. Redirection operators (``>``, ``2>&1``, ``&>``, ``>|``) stay with their
    command. Comments are dropped. Command substitution anywhere outside single quotes
    is refused: its inner command would otherwise escape every check.
    """
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    index = 0
    length = len(command)

    def flush() -> None:
        text = "".join(current)
        if text.strip():
            segments.append(text)  # unstripped: a trailing "\ " is an escaped blank
        current.clear()

    while index < length:
        char = command[index]
        if quote == "'":
            current.append(char)
            if char == "'":
                quote = None
            index += 1
            continue
        if char == "\\":
            if command.startswith("\n", index + 1):
                index += 2  # a line continuation: bash removes both, joining the words
                continue
            current.append(command[index : index + 2])
            index += 2
            continue
        if char == "`" or command.startswith("$(", index):
            raise _CommandParseError(_SUBSTITUTION_REASON)
        if quote is None and command.startswith(("$'", '$"'), index):
            raise _CommandParseError(
                "ANSI-C and locale quoting ($'...', $\"...\") are not allowed by security "
                "policy; use plain quotes"
            )
        if quote == '"':
            current.append(char)
            if char == '"':
                quote = None
            index += 1
            continue
        if char in "'\"":
            quote = char
            current.append(char)
            index += 1
        elif char == "#" and (not current or current[-1][-1:].isspace()):
            newline = command.find("\n", index)
            index = length if newline < 0 else newline
        elif char in "<>":
            if command.startswith("(", index + 1):
                raise _CommandParseError(_SUBSTITUTION_REASON)
            end = index + 1
            while end < length and command[end] in _REDIRECT_CHARS:
                end += 1
            current.append(f" {command[index:end]} ")
            index = end
        elif char == "&" and command.startswith(">", index + 1):
            end = index + 2
            while end < length and command[end] == ">":
                end += 1
            current.append(f" {command[index:end]} ")
            index = end
        elif char in ";&|()\n":
            flush()
            index += 1
        else:
            current.append(char)
            index += 1
    if quote is not None:
        raise _CommandParseError(f"Command has an unterminated {quote} quote")
    flush()
    return segments


def _split_words(segment: str) -> list[str]:
    lexer = shlex.shlex(segment, posix=True, punctuation_chars=_REDIRECT_CHARS)
    lexer.whitespace_split = True
    lexer.whitespace = " \t\n"  # bash's blanks: a carriage return is part of a word
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:
        raise _CommandParseError(f"Command cannot be parsed: {exc}") from None
