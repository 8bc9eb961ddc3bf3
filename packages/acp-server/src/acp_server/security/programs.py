"""What one program does with its arguments: the per-program half of the shell classifier.

``security/commands.py`` splits a command line into simple commands and checks their
paths; ``classify_program`` here judges one program and its words and returns its
``ProgramFindings``. HIGH findings are blocked by ``block_high_risk_commands`` unless
``allowed_commands`` names them explicitly: the program itself for a program that is
high-risk whatever its arguments (``rm``), or the program and the word that makes it run
code as they are written (``python3 -c``, ``npm test``, ``cargo run``, ``git grep -O``).
Changes to the machine's state (``date -s``, ``hostname NAME``) and environment
assignments that make programs run other programs are blocked whatever the allowlist.

Code runners are HIGH because the command the user approves does not show the code that
runs: interpreters given code inline or on stdin, package managers that run a project's
scripts or install packages (installing runs the package's build and install scripts),
build tools, and git's options, configuration and environment that name programs to run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from acp_server.patterns import LazyPattern

HIGH_RISK_COMMANDS: Final = frozenset(
    {
        "rm", "shred", "sudo", "su", "doas", "pkexec", "chmod", "chown", "chgrp", "chattr",
        "curl", "wget", "ssh", "scp", "sftp", "rsync", "ftp", "nc", "ncat", "netcat", "telnet",
        "socat", "dd", "mkfs", "fdisk", "parted", "mount", "umount", "swapon", "swapoff",
        "shutdown", "reboot", "halt", "poweroff", "init", "systemctl", "service", "kill",
        "pkill", "killall", "crontab", "at", "useradd", "userdel", "usermod", "passwd",
        "iptables", "nft",
        # State of the machine: clock, host name, kernel, network, namespaces.
        "timedatectl", "hwclock", "hostnamectl", "sysctl", "modprobe", "insmod", "rmmod",
        "ifconfig", "ip", "route", "nmcli", "chroot", "unshare", "nsenter", "setcap", "mknod",
        "losetup", "renice",
        # Shells and command runners: the real command hides in their arguments.
        "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "eval", "exec", "source",
        ".", "env", "xargs", "nohup", "nice", "timeout", "command", "builtin", "stdbuf",
        "setsid", "strace", "watch", "time", "coproc", "ionice", "chrt", "taskset", "flock",
        "script", "parallel", "gdb",
        # Builtins that change what later commands in the line do.
        "export", "declare", "typeset", "readonly", "local", "alias", "trap", "enable",
        # Package-script runners and build tools: the commands live in project files.
        "npx", "pnpx", "bunx", "uvx", "pipx", "make", "just", "rake", "gradle", "gradlew",
        "mvn", "mvnw", "ant", "tox", "nox", "poetry", "pipenv", "pdm", "hatch", "deno", "bun",
        # Interpreters whose program is always given inline.
        "awk", "gawk", "mawk", "nawk", "expect",
    }
)  # fmt: skip
MEDIUM_RISK_COMMANDS: Final = frozenset(
    {"touch", "mkdir", "mv", "cp", "ln", "tee", "rmdir", "truncate", "install", "patch"}
)
# git subcommands that only read; any other subcommand changes the repository or the
# network-visible state and is MEDIUM.
GIT_READONLY_SUBCOMMANDS: Final = frozenset(
    {
        "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
        "describe", "shortlog", "cat-file", "rev-list", "name-rev", "reflog", "whatchanged",
        "help", "version", "--version", "-v", "--help", "-h",
    }
)  # fmt: skip
PACKAGE_MANAGER_MUTATIONS: Final = {
    "npm": frozenset({"uninstall", "remove", "rm", "un", "unlink", "audit"}),
    "pnpm": frozenset({"remove", "rm", "un", "uninstall", "unlink"}),
    "yarn": frozenset({"remove"}),
    "pip": frozenset({"uninstall"}),
    "pip3": frozenset({"uninstall"}),
    "cargo": frozenset({"add", "remove", "rm", "uninstall", "update", "init", "new"}),
    "uv": frozenset({"init", "venv"}),
}
"""Subcommands that change the project's files or environment without running its code."""
PACKAGE_CODE_RUNNERS: Final = {
    "npm": frozenset(
        {
            "install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal",
            "isntall", "add", "ci", "clean-install", "ic", "install-clean", "isntall-clean",
            "install-test", "it", "install-ci-test", "cit", "test", "t", "tst", "run",
            "run-script", "rum", "urn", "start", "stop", "restart", "exec", "x", "rebuild",
            "rb", "explore", "update", "up", "upgrade", "udpate", "link", "ln", "publish",
            "pack", "init", "create", "innit", "dedupe", "ddp",
        }
    ),
    "pnpm": frozenset(
        {
            "install", "i", "add", "update", "up", "upgrade", "run", "run-script", "test", "t",
            "tst", "start", "stop", "restart", "exec", "dlx", "create", "rebuild", "rb",
            "publish", "pack", "link", "ln", "import", "dedupe",
        }
    ),
    "yarn": frozenset(
        {
            "install", "add", "upgrade", "up", "run", "test", "start", "exec", "dlx", "create",
            "node", "publish", "pack", "rebuild", "link", "set", "init",
        }
    ),
    "pip": frozenset({"install", "download", "wheel"}),
    "pip3": frozenset({"install", "download", "wheel"}),
    "cargo": frozenset(
        {
            "run", "r", "build", "b", "test", "t", "bench", "check", "c", "install", "clippy",
            "doc", "d", "fix", "rustc", "rustdoc", "miri", "publish", "script",
        }
    ),
    "uv": frozenset({"run", "sync", "add", "remove", "lock", "pip", "tool", "build"}),
}  # fmt: skip
"""Subcommands that run the project's scripts, build it, or install packages (whose build
and install scripts run): as good as running arbitrary code."""
# yarn and pnpm run a project script for a subcommand they do not know (`yarn build`).
_SCRIPT_FALLBACK_RUNNERS: Final = frozenset({"yarn", "pnpm"})
_PACKAGE_READ_ONLY: Final = frozenset(
    {"list", "ls", "info", "view", "why", "outdated", "help", "config", "audit", "search",
     "--version", "-v", "-V", "--help", "-h", "licenses", "bin", "root", "whoami", "store"}
)  # fmt: skip
FIND_HIGH_RISK_ACTIONS: Final = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
DANGEROUS_ENV_ASSIGNMENTS: Final = frozenset(
    {"PATH", "BASH_ENV", "ENV", "IFS", "PROMPT_COMMAND", "SHELLOPTS", "PYTHONSTARTUP",
     "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "NODE_OPTIONS", "PAGER", "MANPAGER",
     "EDITOR", "VISUAL", "BROWSER", "LESSOPEN", "LESSCLOSE", "SSH_ASKPASS", "SUDO_ASKPASS",
     "HOME", "XDG_CONFIG_HOME", "ZDOTDIR", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "CC", "CXX"}
)  # fmt: skip
"""Variables whose value names a program to run, or where a program's configuration is
read from (``HOME`` moves ``~/.gitconfig``)."""
DANGEROUS_ENV_PREFIXES: Final = (
    "LD_", "DYLD_", "GIT_", "npm_config_", "NPM_CONFIG_", "CARGO_", "RUSTC", "RUSTFLAGS",
    "PYTHON", "PERL", "RUBY", "NODE_", "BASH_FUNC_",
)  # fmt: skip
"""Whole families: git reads configuration (``GIT_CONFIG_COUNT``/``KEY``/``VALUE``) and
programs to run (``GIT_EXTERNAL_DIFF``, ``GIT_PAGER``) from its environment, and so do
npm, cargo and the interpreters."""

_Allowlisted = Callable[[str], bool]
"""Whether ``allowed_commands`` names the program followed by this word."""
_AWK: Final = frozenset({"awk", "gawk", "mawk", "nawk"})
_PYTHON: Final = LazyPattern(r"(python|pypy)[0-9.]*")
_PYTHON_VALUE_OPTIONS: Final = frozenset("WX")
_INFO_OPTIONS: Final = frozenset(
    {"-V", "-VV", "--version", "-v", "-h", "--help", "--help-all", "-?"}
)
# Per interpreter: the short options that take program text, and the long ones.
_INLINE_CODE_OPTIONS: Final = {
    "node": (frozenset("epi"), ("--eval", "--print", "--interactive")),
    "nodejs": (frozenset("epi"), ("--eval", "--print", "--interactive")),
    "perl": (frozenset("eE"), ()),
    "ruby": (frozenset("e"), ()),
    "php": (frozenset("rBRFE"), ("--run", "--process-begin", "--process-code")),
    "lua": (frozenset("e"), ()),
    "luajit": (frozenset("e"), ()),
    "Rscript": (frozenset("e"), ()),
    "osascript": (frozenset("e"), ()),
}
# git options after the subcommand that make it run a program.
_GIT_PROGRAM_OPTIONS: Final = {
    "grep": ("-O", "--open-files-in-pager"),
    "clone": ("-u", "--upload-pack", "-c", "--config", "--template"),
    "init": ("--template",),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec",),
    "rebase": ("-x", "--exec"),
    "bisect": ("run",),
    "submodule": ("foreach",),
}
_GIT_EXT_DIFF: Final = "--ext-diff"
_GIT_ALWAYS_RUN: Final = frozenset({"difftool", "mergetool", "filter-branch", "instaweb"})
_GIT_CONFIG_WRITES: Final = frozenset(
    {"--add", "--replace-all", "--edit", "-e", "set", "edit", "--unset", "--unset-all"}
)
_DATE_VALUE_OPTIONS: Final = frozenset({"-d", "--date", "-f", "--file", "-r", "--reference"})


class ProgramFindings(msgspec.Struct):
    """``high`` and ``medium`` explain each finding; ``blockable`` lists the HIGH findings
    ``block_high_risk_commands`` refuses."""

    high: list[str] = msgspec.field(default_factory=list)
    blockable: list[str] = msgspec.field(default_factory=list)
    medium: list[str] = msgspec.field(default_factory=list)

    def add_high(self, finding: str, *, allowlisted: bool = False, blocked_as: str = "") -> None:
        self.high.append(finding)
        if not allowlisted:
            self.blockable.append(blocked_as or finding)


def dangerous_assignment(name: str) -> bool:
    """Whether ``NAME=value`` in front of a command can make a program run another one."""
    return name in DANGEROUS_ENV_ASSIGNMENTS or name.startswith(DANGEROUS_ENV_PREFIXES)


def classify_program(
    program: str, arguments: Sequence[str], allowed_commands: Sequence[str]
) -> ProgramFindings:
    """The risk findings of one program run with ``arguments`` (already unquoted words)."""
    found = ProgramFindings()
    name = os.path.basename(program)

    def allowlisted(word: str) -> bool:
        return f"{program} {word}" in allowed_commands

    if name in HIGH_RISK_COMMANDS or name.startswith("mkfs"):
        found.add_high(
            f"{name} (its program text can run commands)" if name in _AWK else name,
            allowlisted=program in allowed_commands,
            blocked_as=f"'{name}' is high-risk",
        )
    elif name in MEDIUM_RISK_COMMANDS:
        found.medium.append(f"{name} modifies files")
    elif name == "find":
        actions = sorted(FIND_HIGH_RISK_ACTIONS.intersection(arguments))
        if actions:
            finding = f"find {' '.join(actions)}"
            found.add_high(finding, blocked_as=f"'{finding}' runs commands or deletes files")
    elif name == "sed" and any(arg.startswith(("-i", "--in-place")) for arg in arguments):
        found.medium.append("sed -i edits files in place")
    elif name == "git":
        _classify_git(arguments, found, allowlisted)
    elif name in PACKAGE_CODE_RUNNERS:
        _classify_package_manager(name, arguments, found, allowlisted)
    elif _PYTHON.fullmatch(name):
        _classify_python(name, arguments, found, allowlisted)
    elif name in _INLINE_CODE_OPTIONS:
        _classify_interpreter(name, arguments, found, allowlisted)
    elif name == "date":
        _classify_date(arguments, found)
    elif name == "hostname" and any(
        not arg.startswith("-") or arg.startswith(("-F", "--file", "-b", "--boot"))
        for arg in arguments
    ):
        found.add_high("hostname NAME sets the machine's host name")
    return found


def _positionals(arguments: Sequence[str]) -> list[str]:
    words = []
    for argument in arguments:
        if argument == "--":
            break
        if not argument.startswith("-"):
            words.append(argument)
    return words


def _classify_package_manager(
    name: str,
    arguments: Sequence[str],
    found: ProgramFindings,
    allowlisted: _Allowlisted,
) -> None:
    positionals = _positionals(arguments)
    runners = PACKAGE_CODE_RUNNERS[name]
    # Any positional, not only the first: an option's value may come first (`--prefix x`).
    running = [word for word in positionals if word in runners]
    if not running and name in _SCRIPT_FALLBACK_RUNNERS:
        first = positionals[0] if positionals else ""
        if first:
            if first not in _PACKAGE_READ_ONLY and first not in PACKAGE_MANAGER_MUTATIONS[name]:
                running = [first]
        elif name == "yarn" and not _INFO_OPTIONS.intersection(arguments):
            running = ["install"]  # a bare `yarn` installs
    if running:
        sub = running[0]
        found.add_high(
            f"{name} {sub} runs project scripts or package build code",
            allowlisted=allowlisted(sub),
        )
        return
    mutations = [word for word in positionals if word in PACKAGE_MANAGER_MUTATIONS[name]]
    if mutations:
        found.medium.append(f"{name} {mutations[0]}")


def _classify_python(
    name: str, arguments: Sequence[str], found: ProgramFindings, allowlisted: _Allowlisted
) -> None:
    """``-c CODE`` and a program read from stdin are inline code; ``-m pip install`` is a
    package install; a script file or another ``-m`` module runs what the workspace holds."""
    index = 0
    info = False
    while index < len(arguments):
        argument = arguments[index]
        if argument == "-":
            break  # the program comes from stdin
        if argument in _INFO_OPTIONS:
            info = True
        if argument == "--check-hash-based-pycs":
            index += 2
            continue
        if argument.startswith("--") or not argument.startswith("-"):
            if not argument.startswith("-"):
                return  # a script file
            index += 1
            continue
        cluster = argument[1:]
        for position, letter in enumerate(cluster):
            if letter == "c":
                found.add_high(f"{name} -c runs inline code", allowlisted=allowlisted("-c"))
                return
            if letter == "i":  # after the script, the program goes on reading stdin
                found.add_high(
                    f"{name} -i reads more program from stdin (inline code)",
                    allowlisted=allowlisted("-i"),
                )
                return
            if letter == "m":
                module = cluster[position + 1 :] or (
                    arguments[index + 1] if index + 1 < len(arguments) else ""
                )
                rest = arguments[index + (1 if cluster[position + 1 :] else 2) :]
                if module == "pip":
                    _classify_package_manager("pip", rest, found, allowlisted)
                return
            if letter in _PYTHON_VALUE_OPTIONS:
                if position == len(cluster) - 1:
                    index += 1  # the option's value is the next word
                break
        index += 1
    if not info:
        found.add_high(
            f"{name} reads its program from stdin (inline code)", allowlisted=allowlisted("-")
        )


def _classify_interpreter(
    name: str, arguments: Sequence[str], found: ProgramFindings, allowlisted: _Allowlisted
) -> None:
    short, long = _INLINE_CODE_OPTIONS[name]
    for argument in arguments:
        if argument == "--":
            break
        inline = argument.startswith(long) if long else False
        if name == "perl" and argument.startswith(("-M", "-m", "-I")):
            # A module to load (its value attached); -M'Module;code' runs the code too.
            inline = ";" in argument
        elif not inline and argument.startswith("-") and not argument.startswith("--"):
            inline = any(letter in short for letter in argument[1:])
        if inline:
            found.add_high(f"{name} {argument} runs inline code", allowlisted=allowlisted(argument))
            return
    if not _positionals(arguments) and not _INFO_OPTIONS.intersection(arguments):
        found.add_high(
            f"{name} reads its program from stdin (inline code)", allowlisted=allowlisted("-")
        )


def _classify_date(arguments: Sequence[str], found: ProgramFindings) -> None:
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in ("-s", "--set") or argument.startswith(("--set=", "-s")):
            found.add_high("date -s sets the system clock")
            return
        if argument in _DATE_VALUE_OPTIONS:
            index += 2
            continue
        if not argument.startswith(("-", "+")):
            found.add_high("date MMDDhhmm sets the system clock")
            return
        index += 1


def _classify_git(
    arguments: Sequence[str], found: ProgramFindings, allowlisted: _Allowlisted
) -> None:
    index = 0
    while index < len(arguments) and arguments[index].startswith("-"):
        option = arguments[index]
        if option == "-c" or option.startswith(("--config-env", "--exec-path")):
            found.add_high(f"git {option} (configuration can run arbitrary programs)")
        if option in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            index += 1  # the option's value
        index += 1
    sub = arguments[index] if index < len(arguments) else ""
    rest = arguments[index + 1 :]
    if sub in _GIT_ALWAYS_RUN:
        found.add_high(f"git {sub} runs external programs", allowlisted=allowlisted(sub))
        return
    for option in _GIT_PROGRAM_OPTIONS.get(sub, ()):
        if any(word == option or _attached(word, option) for word in rest):
            found.add_high(
                f"git {sub} {option} runs a program it is given",
                allowlisted=allowlisted(f"{sub} {option}"),
            )
            return
    if _GIT_EXT_DIFF in rest:
        found.add_high(f"git {sub} --ext-diff runs the external diff program")
        return
    if sub == "config" and (_GIT_CONFIG_WRITES.intersection(rest) or len(_positionals(rest)) >= 2):
        found.add_high(
            "git config can make later git commands run programs",
            allowlisted=allowlisted("config"),
        )
        return
    if sub and sub not in GIT_READONLY_SUBCOMMANDS:
        found.medium.append(f"git {sub}")


def _attached(word: str, option: str) -> bool:
    """``--upload-pack=cmd`` or ``-Ocmd``: the option with its value in one word."""
    if option.startswith("--"):
        return word.startswith(option + "=")
    return len(option) == 2 and word.startswith(option) and len(word) > 2


# Per program: the options that make it follow symbolic links while walking a tree. Short
# options may be clustered (``-rRn``); ``ls`` and ``cp`` walk only with their recursive flag.
_FOLLOW_OPTIONS: Final = {
    "grep": ("R", ("--dereference-recursive",)),
    "egrep": ("R", ("--dereference-recursive",)),
    "fgrep": ("R", ("--dereference-recursive",)),
    "rg": ("L", ("--follow",)),
    "du": ("L", ("--dereference",)),
    "tree": ("l", ()),
    "tar": ("h", ("--dereference",)),
    "ls": ("L", ("--dereference",)),
    "cp": ("L", ("--dereference",)),
}
_RECURSIVE_ONLY: Final = {"ls": ("R", "--recursive"), "cp": ("rR", "--recursive")}


def follows_links_recursively(program: str, arguments: Sequence[str]) -> str | None:
    """The option (``grep -R``, ``find -L``) that makes the program follow symbolic links
    into the directories it walks, or None."""
    name = os.path.basename(program)
    if name == "find":
        option = next((word for word in arguments if word in ("-L", "-follow")), None)
        return f"find {option}" if option else None
    if name not in _FOLLOW_OPTIONS:
        return None
    letters, long = _FOLLOW_OPTIONS[name]
    option = next((word for word in arguments if _has_option(word, letters, long)), None)
    if option is None:
        return None
    if name in _RECURSIVE_ONLY:
        recursive_letters, recursive_long = _RECURSIVE_ONLY[name]
        if not any(_has_option(word, recursive_letters, (recursive_long,)) for word in arguments):
            return None
    return f"{name} {option}"


def _has_option(word: str, letters: str, long: Sequence[str]) -> bool:
    if word.startswith("--"):
        return word.split("=", 1)[0] in long
    return word.startswith("-") and any(letter in word[1:] for letter in letters)
