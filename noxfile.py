"""Developer and CI sessions: tests, lint, typecheck, bench.

Each session syncs the uv workspace into its own virtualenv (no lock file is committed:
versions are floors in pyproject.toml, bounded by ``[tool.uv] exclude-newer``).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["tests", "lint", "typecheck"]


def _sync(session: nox.Session) -> None:
    session.run_install(
        "uv",
        "sync",
        "--group",
        "dev",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
    )


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Unit, property and end-to-end tests."""
    _sync(session)
    session.run("pytest", *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff format --check, ruff check and the import contract (lint-imports)."""
    _sync(session)
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("lint-imports", "--no-cache")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the three packages, the tests and the benchmarks."""
    _sync(session)
    session.run("mypy")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmarks side by side with the official ACP SDK; prints figures."""
    _sync(session)
    scripts = session.posargs or sorted(
        str(p) for p in __import__("pathlib").Path("bench").glob("*.py")
    )
    for script in scripts:
        session.run("python", script)
