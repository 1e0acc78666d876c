"""
title: Run with sandrun
author: sandrun
version: 1.0.0
required_open_webui_version: 0.5.0
description: A Run button under every answer: runs the answer's code blocks in a sandrun sandbox (in order, in one workspace per chat) and appends their output, plots and download links to the answer.
licence: MIT
"""

# Open WebUI Action function. Paste this file in Admin Panel -> Functions -> New function,
# fill in the valves (service URL, token), and enable it globally or per model. Only the Python
# standard library and pydantic (which Open WebUI ships) are used: the HTTP call runs in a
# worker thread, so Open WebUI's event loop never waits on it.
#
# The message is sent as `markdown` to POST /run: sandrun itself picks the runnable fenced
# blocks (DESIGN.md §5) and says in `plan` which ones it ran and why it skipped the others.

import asyncio
import json
import re
import signal
import socket
import urllib.error
import urllib.request
import uuid
from typing import Any, Awaitable, Callable, Optional

from pydantic import BaseModel, Field

# --- sandrun client: begin ------------------------------------------------------------------
# The same text in sandrun_action.py and sandrun_tool.py (a test checks): each file must stand
# alone, since Open WebUI installs a plugin by pasting one file.

# Added to the run's wall-clock limit to bound the whole HTTP exchange: the wait for a free
# sandbox (the server's queue_wait_s, 10 s by default), setting it up and publishing its files.
HTTP_MARGIN_S = 30
RASTER_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class Reply:
    """An HTTP answer from sandrun: status, JSON body (None if not JSON), raw text, headers."""

    def __init__(self, status: int, body: Any, text: str, headers: dict):
        self.status = status
        self.body = body
        self.text = text
        self.headers = headers


class Unreachable(Exception):
    """No HTTP answer at all: connection refused, unknown host, timeout. str() is a sentence."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect is reported, not followed: urllib would turn the POST into a GET, and Open
    # WebUI's own tool-server client does not follow redirects either.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def service_base(url: str) -> str:
    """The service URL without a trailing slash or a pasted '/run'."""
    url = (url or "").strip().rstrip("/")
    if url.endswith("/run"):
        url = url[: -len("/run")]
    return url


def post_run(base_url: str, token: str, payload: dict, timeout_s: float) -> Reply:
    """POST payload to <base_url>/run and wait for the answer. Blocking: call it in a thread.
    Raises Unreachable when no HTTP answer arrives within timeout_s."""
    base = service_base(base_url)
    if not base.startswith(("http://", "https://")):
        raise Unreachable(
            "The 'service_url' valve is not set to a web address: set it to sandrun's, e.g. "
            "http://sandrun:8080."
            if not base
            else f"The 'service_url' valve ({base}) must start with http:// or https://."
        )
    request = urllib.request.Request(
        base + "/run",
        data=json.dumps(payload).encode("utf-8"),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "sandrun-openwebui/1.0",
        },
    )
    if token:
        request.add_header("Authorization", "Bearer " + token.strip())
    # The user in a header too (the body's and the header's must agree): a front nginx of
    # several sandrun nodes sees only headers, and keeps each user on one node by them.
    user = str(payload.get("user") or "")
    if user and user.isascii() and user.isprintable():
        request.add_header("X-Sandrun-User", user)
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(request, timeout=timeout_s) as response:
            status, headers, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        status, headers, raw = e.code, dict(e.headers or {}), e.read() or b""
    except (socket.timeout, TimeoutError):
        raise Unreachable(
            f"sandrun at {service_base(base_url)} did not answer within {timeout_s:.0f} s; "
            "the run may still be going on the server."
        )
    except urllib.error.URLError as e:
        raise Unreachable(_unreachable_sentence(base_url, e.reason))
    except (OSError, ValueError) as e:
        raise Unreachable(_unreachable_sentence(base_url, e))
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return Reply(status, body, text, {k.lower(): v for k, v in headers.items()})


def _unreachable_sentence(base_url: str, reason: Any) -> str:
    if isinstance(reason, (socket.timeout, TimeoutError)):
        why = "the connection timed out"
    elif isinstance(reason, ConnectionRefusedError):
        why = "the connection was refused (nothing listens there)"
    elif isinstance(reason, socket.gaierror):
        why = "the host name does not resolve"
    else:
        why = str(reason) or type(reason).__name__
    return (
        f"Could not reach sandrun at {service_base(base_url) or '(no URL set)'}: {why}. "
        "Check the 'service_url' valve and that Open WebUI can reach that address."
    )


async def call_sandrun(base_url: str, token: str, payload: dict, timeout_s: float) -> Reply:
    """post_run in a worker thread, so that Open WebUI's event loop keeps running."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(post_run, base_url, token, payload, timeout_s), timeout_s + 5
        )
    except asyncio.TimeoutError:
        raise Unreachable(
            f"sandrun at {service_base(base_url)} did not answer within {timeout_s:.0f} s; "
            "the run may still be going on the server."
        )


def failure_sentence(reply: Reply, base_url: str) -> str:
    """A sentence for an answer other than 200 with a run result."""
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    code = error.get("code", "") if isinstance(error, dict) else ""
    message = (error.get("message", "") if isinstance(error, dict) else "").rstrip(".")
    url = service_base(base_url)
    s = reply.status
    if 300 <= s < 400:
        where = reply.headers.get("location", "another address")
        return (
            f"{url} answered with a redirect to {where}. Put the final address in the "
            "'service_url' valve: redirects are not followed."
        )
    if error is None and s != 200:
        snippet = " ".join(reply.text.split())[:160]
        return (
            f"{url} answered HTTP {s} with something that is not sandrun's JSON"
            f"{': ' + snippet if snippet else ''}. Check that the 'service_url' valve points at "
            "sandrun's nginx."
        )
    if s == 200:
        return (
            f"{url} answered, but not with a sandrun run result. Check that the 'service_url' "
            "valve points at sandrun's nginx."
        )
    if s == 400:
        if code == "invalid_package":
            return (
                f"sandrun refused an entry of the plugin's 'packages' valve: {message}. "
                "Correct it in the valves (names with optional versions, comma-separated)."
            )
        if code == "not_supported":
            return f"This sandrun server does not support that request yet: {message}."
        if code == "no_runnable_code":
            return f"There is no code to run here: {message}."
        if code in ("limit_above_ceiling", "limit_below_minimum"):
            return (
                f"The limits in this plugin's valves are outside what the server allows: "
                f"{message}. Change them in the valves."
            )
        return f"sandrun refused the request: {message}."
    if s == 401:
        return "sandrun refused the bearer token: put a valid token in the plugin's 'token' valve."
    if s == 403:
        if code == "network_forbidden" and error.get("field") == "packages":
            return (
                "This sandrun server cannot prepare the packages of the plugin's 'packages' "
                f"valve: {message}."
            )
        if code == "network_forbidden":
            return (
                "This sandrun server does not allow network access: turn the plugin's "
                "'network' valve off."
            )
        return f"sandrun refused access: {message}."
    if s in (404, 405):
        return (
            f"There is no sandrun service at {url} (HTTP {s}): check the plugin's "
            "'service_url' valve."
        )
    if s == 409:
        return "An earlier run in this chat is still going: try again when it has finished."
    if s == 413:
        return "This is too large for sandrun to accept (HTTP 413)."
    if s == 429:
        return "Too many runs for this user right now: wait a few seconds and try again."
    if s == 500:
        if code == "sandbox_error":
            return f"sandrun could not build a sandbox for this run: {message}."
        return f"sandrun failed with an internal error: {message}."
    if s == 502:
        return "nginx in front of sandrun cannot reach the sandrun daemon: is sandrund running?"
    if s == 503:
        if code == "environment_building":
            wait = reply.headers.get("retry-after", "a few")
            return (
                "sandrun is still installing the packages of the plugin's 'packages' valve: "
                f"try again in {wait} s."
            )
        if code == "busy":
            wait = reply.headers.get("retry-after", "a few")
            return f"sandrun is busy: all its sandboxes are in use. Try again in {wait} s."
        return f"sandrun cannot run code right now: {message}."
    if s == 504:
        return "The sandrun daemon did not answer nginx in time."
    return f"sandrun answered HTTP {s}: {message or reply.text[:160]}."


def signal_name(number: Any) -> str:
    try:
        return signal.Signals(int(number)).name
    except (TypeError, ValueError):
        return "unknown"


def seconds(ms: Any) -> str:
    try:
        s = float(ms) / 1000.0
    except (TypeError, ValueError):
        return "?"
    if s < 0.1:
        return "under 0.1 s"
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def human_size(n: Any) -> str:
    try:
        n = float(n)
    except (TypeError, ValueError):
        return "?"
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GiB"


def outcome_sentence(result: dict) -> str:
    """What happened to a run that sandrun carried out (HTTP 200), in a sentence."""
    status = result.get("status")
    limits = result.get("limits") or {}
    took = seconds((result.get("usage") or {}).get("wall_ms"))
    if status == "ok":
        return f"The code ran successfully in {took}."
    if status == "error" and result.get("exit_code") is None:  # a kernel's cell
        return "The code raised an error (the traceback is in stderr)."
    if status == "error" and result.get("exit_code") == 0:
        # e.g. a fork bomb: the program exited 0, a process it started hit a limit
        return "The run failed although the program exited 0 (stderr says why)."
    if status == "error":
        return f"The code failed with exit code {result.get('exit_code')}."
    if status == "killed":
        sig = result.get("signal")
        if sig is None:  # a kernel that died: no process of the run's own to name a signal of
            return "The program was killed."
        return f"The program was killed by signal {sig} ({signal_name(sig)})."
    if status == "timeout":
        return (
            "Stopped: the run reached its time limit "
            f"({limits.get('wall_time_s', '?')} s of wall-clock time, "
            f"{limits.get('cpu_time_s', '?')} s of CPU time)."
        )
    if status == "memory_limit":
        return (
            "Stopped: the run needed more than its memory limit of "
            f"{limits.get('memory_mb', '?')} MiB."
        )
    if status == "output_limit":
        return (
            "Stopped: the program printed more than the output limit of "
            f"{human_size(limits.get('output_bytes'))}; the output is cut."
        )
    if status == "file_limit":
        return (
            "The code ran, but its files went over the limits for saved files (at most "
            f"{limits.get('max_files', '?')} files of {limits.get('file_size_mb', '?')} MiB each, "
            "within the user's quota): some files were not saved."
        )
    if status == "sandbox_error":
        return "sandrun could not build a sandbox for this run."
    return f"The run ended with status '{status}'."


def clip(text: str, limit: int) -> str:
    """At most about `limit` characters: the head and the tail, with a marker between."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[len(text) - limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def fenced(text: str, info: str = "text") -> str:
    """`text` in a fenced code block whose fence is longer than any backtick run inside."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


def _link_text(name: str) -> str:
    return "".join("\\" + c if c in "\\[]" else c for c in name)


def _link_target(url: str) -> str:
    # Pointy brackets keep a URL with spaces or parentheses in one piece (CommonMark).
    return f"<{url}>" if any(c in url for c in " ()<>") else url


def file_markdown(f: dict) -> str:
    """A raster image as an inline markdown image, any other file as a link with its size."""
    name, url = _link_text(f.get("name") or f.get("path") or "file"), _link_target(f.get("url", ""))
    if f.get("mime") in RASTER_IMAGE_TYPES:
        return f"![{name}]({url})"
    return f"[{name}]({url}) ({human_size(f.get('size'))})"


def skipped_files_line(result: dict) -> str:
    """'Not saved: a (too_large), b (symlink).' Ignored paths (caches, pip's files) are noise."""
    items = [
        f"{s.get('path')} ({s.get('reason')})"
        for s in result.get("files_skipped") or []
        if s.get("reason") != "ignored"
    ]
    return ("Not saved: " + ", ".join(items) + ".") if items else ""


def _inert_markdown(text: str) -> str:
    """A table or text a program made, as Markdown that can only be a table or text: no HTML,
    no links and no images (those would load from anywhere when the chat is shown)."""
    return "".join("\\" + c if c in "[]" else {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(c, c)
                   for c in text)


def displays_markdown(result: dict) -> list:
    """The run's `displays` (what the program showed: charts, tables) as Markdown, in order:
    an image inline, a table as a Markdown table, text as text."""
    parts = []
    for d in result.get("displays") or []:
        if not isinstance(d, dict):
            continue
        kind, text, f = d.get("kind"), d.get("text"), d.get("file")
        if kind == "image" and isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES:
            parts.append(file_markdown(f))
        elif kind == "table" and isinstance(text, str) and text:
            parts.append(_inert_markdown(text))
        elif kind == "text" and isinstance(text, str) and text:
            parts.append(_inert_markdown(text) if d.get("mime") == "text/markdown" else fenced(text))
    return parts


def displayed_urls(result: dict) -> set:
    """URLs of the files `displays` shows, so that a file list need not repeat them."""
    return {
        d["file"].get("url")
        for d in result.get("displays") or []
        if isinstance(d, dict) and isinstance(d.get("file"), dict)
    }


def packages_list(valve: str) -> list:
    """The `packages` valve (comma-separated requirements) as the request's list."""
    return [p.strip() for p in valve.split(",") if p.strip()]


def limits_payload(wall_time_s: int, memory_mb: int) -> dict:
    """The `limits` object: one time valve sets both the wall-clock and the CPU limit, since a
    user means the one they notice; 0 leaves a limit at the server's default."""
    limits = {}
    if wall_time_s > 0:
        limits["wall_time_s"] = wall_time_s
        limits["cpu_time_s"] = wall_time_s
    if memory_mb > 0:
        limits["memory_mb"] = memory_mb
    return limits


def http_timeout(wall_time_s: int) -> float:
    # 300 s is the server's default ceiling: the longest a run with the default wall time can
    # take if the valve leaves it to the server.
    return float((wall_time_s if wall_time_s > 0 else 300) + HTTP_MARGIN_S)


async def emit(emitter: Optional[Callable[[dict], Awaitable[Any]]], event: dict) -> None:
    if emitter is not None:
        await emitter(event)


def status_event(description: str, done: bool) -> dict:
    return {"type": "status", "data": {"description": description, "done": done, "hidden": False}}


def code_execution_event(
    id_: str, name: str, language: str, code: str, result: Optional[dict]
) -> dict:
    """An Open WebUI code execution entry; without `result` it shows as running. Emitting the
    same id again replaces the entry."""
    data = {"type": "code_execution", "id": id_, "name": name, "language": language, "code": code}
    if result is not None:
        data["result"] = result
    return {"type": "source", "data": data}


# --- sandrun client: end --------------------------------------------------------------------


# What this Action appends starts with this line; a second click runs the answer, not the
# output of the first.
APPENDIX_MARKER = "\n\n---\n**sandrun:** "
# Open WebUI keeps a model's reasoning and its tool and code-interpreter calls inside the answer
# as <details type="..."> elements: not code the user was shown as the answer.
OPEN_WEBUI_DETAILS = re.compile(
    r'<details\s+type="(?:reasoning|code_interpreter|tool_calls)"[^>]*>.*?</details>\s*', re.S
)


def _message_text(message: dict) -> str:
    """The answer as the user sees it, without our earlier appendix or Open WebUI's details."""
    content = message.get("content", "")
    if isinstance(content, list):  # multimodal parts
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return ""
    content = content.split(APPENDIX_MARKER, 1)[0]
    return OPEN_WEBUI_DETAILS.sub("", content)


def _target_message(body: dict) -> Optional[dict]:
    """The message under which the button was pressed (body['id']), else the last answer."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for m in messages:
        if body.get("id") and m.get("id") == body.get("id"):
            return m
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return m
    return None


def _english_list(items: list) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _block(entry: dict) -> str:
    """Blocks are numbered from 1 for people (the API's `index` counts from 0)."""
    return f"block {int(entry.get('index', 0)) + 1} ({entry.get('language') or 'untagged'})"


_HEADER = re.compile(r"^--- block (\d+) \(", re.M)
_INSTALL = re.compile(r"^\s*(?:[%!]\s*)?(?:sudo\s+)?(?:pip3?|python3?\s+-m\s+pip)\s+install\b", re.M)


def _people_numbered(text: str) -> str:
    """The service's header lines in joined output ("--- block 0 (bash, install) ---") count
    from 0; the summary and the entries count from 1: the headers are renumbered to match."""
    return _HEADER.sub(lambda m: f"--- block {int(m.group(1)) + 1} (", text)


def _installs(text: str) -> bool:
    """Whether the answer has a pip install line (a shell block, or %pip/!pip in Python)."""
    return _INSTALL.search(text) is not None


class Action:
    class Valves(BaseModel):
        service_url: str = Field(
            default="http://127.0.0.1:8080",
            description="sandrun's address as Open WebUI's server reaches it (nginx in front of "
            "sandrund), e.g. http://sandrun:8080",
        )
        token: str = Field(default="", description="Bearer token from sandrun's tokens_file")
        wall_time_s: int = Field(
            default=30,
            description="Time limit of a run in seconds (wall-clock and CPU); 0 = the server's "
            "default",
        )
        memory_mb: int = Field(
            default=0, description="Memory limit of a run in MiB; 0 = the server's default"
        )
        network: bool = Field(
            default=False, description="Ask for outbound network access (the server may refuse)"
        )
        packages: str = Field(
            default="",
            description="Python packages every run can import, comma-separated (e.g. "
            "\"yfinance, pandas>=2\"): the server installs them once into a prepared "
            "environment and reuses it",
        )
        show_plan: bool = Field(
            default=False, description="Also list every code block found and why it ran or not"
        )
        max_output_chars: int = Field(
            default=8000,
            description="Longest output shown in the answer; the middle of longer output is cut",
        )
        priority: int = Field(
            default=0, description="Position of the button among the actions (lower = first)"
        )

    def __init__(self):
        self.valves = self.Valves()

    async def action(
        self,
        body: dict,
        __user__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __event_call__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __metadata__: Optional[dict] = None,
    ) -> Optional[dict]:
        valves = self.valves
        message = _target_message(body or {})
        text = _message_text(message) if message else ""
        if not text.strip():
            await emit(
                __event_emitter__, status_event("Nothing to run: the answer is empty.", True)
            )
            return None

        chat_id = (body or {}).get("chat_id") or (__metadata__ or {}).get("chat_id") or ""
        message_id = (message or {}).get("id") or (body or {}).get("id") or uuid.uuid4().hex
        payload: dict = {"markdown": text}
        if (__user__ or {}).get("id"):
            payload["user"] = str(__user__["id"])
        if chat_id:
            payload["session"] = str(chat_id)
        limits = limits_payload(valves.wall_time_s, valves.memory_mb)
        if limits:
            payload["limits"] = limits
        if valves.network:
            payload["network"] = True
        if packages_list(valves.packages):
            payload["packages"] = packages_list(valves.packages)

        # One code_execution entry per executed block. Which blocks run is known only from the
        # answer, so a first entry shows the run going on and becomes the first block's entry.
        first_id = f"sandrun-{message_id}-0"
        # The install runs first and usually takes longest: say so while it goes on.
        # (or builds the environment of the 'packages' valve, the first time)
        starting = (
            "Installing packages…"
            if _installs(text) or packages_list(valves.packages)
            else "Running the code in sandrun…"
        )
        await emit(__event_emitter__, status_event(starting, False))
        await emit(
            __event_emitter__,
            code_execution_event(first_id, "Running the code blocks…", "", "", None),
        )

        try:
            reply = await call_sandrun(
                valves.service_url, valves.token, payload, http_timeout(valves.wall_time_s)
            )
        except Unreachable as e:
            return await self._fail(__event_emitter__, first_id, str(e))
        if reply.status != 200 or not isinstance(reply.body, dict) or "status" not in reply.body:
            return await self._fail(
                __event_emitter__, first_id, failure_sentence(reply, valves.service_url)
            )

        result = reply.body
        headline = _headline(result)
        await self._emit_blocks(__event_emitter__, message_id, result)
        await emit(
            __event_emitter__,
            {"type": "message", "data": {"content": self._appendix(result, headline)}},
        )
        await emit(__event_emitter__, status_event(headline, True))
        return None

    async def _fail(self, emitter, first_id: str, sentence: str) -> None:
        result = {"output": "", "error": sentence, "files": []}
        await emit(emitter, code_execution_event(first_id, "sandrun", "", "", result))
        appended = f"{APPENDIX_MARKER}{sentence}\n"
        await emit(emitter, {"type": "message", "data": {"content": appended}})
        await emit(emitter, status_event(sentence, True))
        return None

    async def _emit_blocks(self, emitter, message_id: str, result: dict) -> None:
        steps = result.get("snippets")
        if not isinstance(steps, list) or not steps:
            # No per-block results (a single program ran): one entry for the whole run, named
            # after the one block the plan ran, if it says so.
            ran = [e for e in result.get("plan") or [] if e.get("run")]
            single = ran[0] if len(ran) == 1 else {"index": 0, "language": ""}
            steps = [dict(result, index=single.get("index", 0), language=single.get("language"))]
        files = [
            {"name": f.get("name") or f.get("path"), "url": f.get("url")}
            for f in result.get("files") or []
        ]
        limit = self.valves.max_output_chars
        for k, step in enumerate(steps):
            ok = step.get("status") == "ok"
            stdout, stderr = step.get("stdout") or "", step.get("stderr") or ""
            output = clip(stdout, limit)
            if ok and stderr:
                if output and not output.endswith("\n"):
                    output += "\n"
                output += "[stderr]\n" + clip(stderr, limit)
            error = ""
            if not ok:
                error = "\n".join(x for x in (clip(stderr, limit), _step_sentence(step)) if x)
            last = k == len(steps) - 1
            await emit(
                emitter,
                code_execution_event(
                    f"sandrun-{message_id}-{k}",
                    _capital(_block(step)) if step.get("language") else "Code",
                    step.get("language") or "",
                    step.get("code") or "",
                    {
                        "output": output or ("(no output)" if ok else ""),
                        "error": error,
                        # Files belong to the whole run; they are listed with its last block.
                        "files": files if last else [],
                    },
                ),
            )

    def _appendix(self, result: dict, headline: str) -> str:
        """The text appended to the answer."""
        parts = [APPENDIX_MARKER + headline]
        stdout = _people_numbered(result.get("stdout") or "")
        stderr = _people_numbered(result.get("stderr") or "")
        if stdout:
            parts.append(fenced(clip(stdout, self.valves.max_output_chars)))
        if stderr:
            parts.append("stderr:\n" + fenced(clip(stderr, self.valves.max_output_chars)))
        if not stdout and not stderr:
            parts.append("_(no output)_")
        # What the program showed (plt.show(), a trailing DataFrame), in order; then the files
        # it saved that were not among them.
        parts.extend(displays_markdown(result))
        shown = displayed_urls(result)
        files = [f for f in result.get("files") or [] if f.get("url") not in shown]
        images = [file_markdown(f) for f in files if f.get("mime") in RASTER_IMAGE_TYPES]
        others = [file_markdown(f) for f in files if f.get("mime") not in RASTER_IMAGE_TYPES]
        parts.extend(images)
        if others:
            parts.append("\n".join("- " + o for o in others))
        skipped = skipped_files_line(result)
        if skipped:
            parts.append(skipped)
        blocks = _blocks_line(result)
        if blocks:
            parts.append(blocks)
        if self.valves.show_plan and result.get("plan"):
            parts.append(_plan_table(result["plan"]))
        return "\n\n".join(parts) + "\n"


def _step_sentence(step: dict) -> str:
    status = step.get("status")
    if status == "error":
        return f"Exit code {step.get('exit_code')}."
    if status == "killed":
        return f"Killed by signal {step.get('signal')} ({signal_name(step.get('signal'))})."
    if status == "timeout":
        return "Stopped: time limit reached."
    if status == "memory_limit":
        return "Stopped: memory limit reached."
    if status == "output_limit":
        return "Stopped: output limit reached."
    return f"Status: {status}." if status and status != "ok" else ""


def _headline(result: dict) -> str:
    """outcome_sentence, naming the failing block when the answer had several."""
    sentence = outcome_sentence(result)
    steps = result.get("snippets") or []
    failed = [s for s in steps if s.get("status") not in (None, "ok")]
    if result.get("status") == "error" and failed and result.get("plan") is not None:
        step = failed[0]
        sentence = f"{_capital(_block(step))} failed with exit code {step.get('exit_code')}."
    return sentence


def _blocks_line(result: dict) -> str:
    """One line naming the blocks run, not reached and skipped, from `plan` and `snippets`."""
    plan = result.get("plan")
    if not isinstance(plan, list) or not plan:
        return ""
    steps = result.get("snippets") or []
    # Without per-block results, what the plan chose is what ran.
    ran_indexes = {s.get("index") for s in steps} if steps else {e.get("index") for e in plan}
    ran = [_block(e) for e in plan if e.get("run") and e.get("index") in ran_indexes]
    unreached = [_block(e) for e in plan if e.get("run") and e.get("index") not in ran_indexes]
    skipped = [
        f"block {int(e.get('index', 0)) + 1} ({e.get('language') or 'untagged'}, "
        f"{e.get('reason') or 'not runnable'})"
        for e in plan
        if not e.get("run")
    ]
    clauses = []
    if ran:
        clauses.append("Ran " + _english_list(ran))
    if unreached:
        clauses.append("did not reach " + _english_list(unreached) + " after the failure")
    if skipped:
        clauses.append("skipped " + _english_list(skipped))
    line = "; ".join(clauses)
    return (line[0].upper() + line[1:] + ".") if line else ""


def _plan_table(plan: list) -> str:
    rows = ["| block | language | runs | why |", "|---|---|---|---|"]
    for e in plan:
        why = str(e.get("reason") or "").replace("|", "\\|")
        rows.append(
            f"| {int(e.get('index', 0)) + 1} | {e.get('language') or '-'} | "
            f"{'yes' if e.get('run') else 'no'} | {why} |"
        )
    return "\n".join(rows)
