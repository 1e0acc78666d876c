"""
title: sandrun
author: sandrun
version: 1.0.0
required_open_webui_version: 0.5.0
description: Lets the model run Python and Bash in a sandrun sandbox: output, exit status and download links for the files it writes; files stay in the chat's workspace between calls.
licence: MIT
"""

# Open WebUI Tool. Paste this file in Workspace -> Tools -> New tool, fill in the valves
# (service URL, token), and enable the tool for a model or in a chat. Only the Python standard
# library and pydantic (which Open WebUI ships) are used: the HTTP call runs in a worker thread,
# so Open WebUI's event loop never waits on it.
#
# Every public method of `Tools` becomes a tool the model can call, with its docstring as the
# description: helpers therefore live at module level. Each call is asked for as a stream:
# while it runs, its code execution entry shows the output so far (about once a second).

import asyncio
import base64
import hashlib
import http.client
import importlib
import inspect
import json
import re
import signal
import socket
import threading
import urllib.error
import urllib.request
import uuid
from html.parser import HTMLParser
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


def post_run(base_url: str, token: str, payload: dict, timeout_s: float,
             live: Optional["LiveOutput"] = None) -> Reply:
    """POST payload to <base_url>/run and wait for the answer. Blocking: call it in a thread.
    Raises Unreachable when no HTTP answer arrives within timeout_s. With `live`, the run is
    asked for as a stream: its output goes into `live` as it comes, and the Reply is the
    stream's last event; a server that answers plain JSON (an older sandrun, or an error) is
    read as without `live`."""
    base = service_base(base_url)
    if not base.startswith(("http://", "https://")):
        raise Unreachable(
            "The 'service_url' valve is not set to a web address: set it to sandrun's, e.g. "
            "http://127.0.0.1:8080."
            if not base
            else f"The 'service_url' valve ({base}) must start with http:// or https://."
        )
    request = urllib.request.Request(
        base + "/run",
        data=json.dumps(payload).encode("utf-8"),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": STREAM_TYPE if live is not None else "application/json",
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
            status, headers = response.status, dict(response.headers)
            lower = {k.lower(): v for k, v in headers.items()}
            streamed = lower.get("content-type", "").split(";")[0].strip() == STREAM_TYPE
            if live is not None and status == 200 and streamed:
                return read_stream(response, live, base_url, lower)
            raw = response.read()
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


async def call_sandrun(base_url: str, token: str, payload: dict, timeout_s: float,
                       progress: Optional[Callable[[list], Awaitable[Any]]] = None) -> Reply:
    """post_run in a worker thread, so that Open WebUI's event loop keeps running. With
    `progress`, the run is streamed, and while it goes on `progress` is called every
    PROGRESS_INTERVAL_S with what it printed so far (LiveOutput.snapshot())."""
    live = LiveOutput() if progress is not None else None
    work = asyncio.ensure_future(
        asyncio.to_thread(post_run, base_url, token, payload, timeout_s, live)
    )
    # Whatever happens to it after this call gave up on it is of no interest.
    work.add_done_callback(lambda f: f.cancelled() or f.exception())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s + 5
    try:
        while loop.time() < deadline:
            wait = min(deadline - loop.time(), PROGRESS_INTERVAL_S if live else timeout_s + 5)
            done, _ = await asyncio.wait({work}, timeout=max(wait, 0))
            if done:
                return work.result()
            if live is not None:
                await progress(live.snapshot())
    finally:
        if live is not None and not work.done():
            live.stopped = True
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


def displays_markdown(result: dict, images: Optional[dict] = None) -> list:
    """The run's `displays` (what the program showed: charts, tables) as Markdown, in order:
    an image inline (at the URL `images` maps its link to, if any), a table as a Markdown table
    (an HTML table too: a kernel's DataFrame), text as text."""
    parts = []
    for d in result.get("displays") or []:
        if not isinstance(d, dict):
            continue
        kind, text, f, mime = d.get("kind"), d.get("text"), d.get("file"), d.get("mime")
        if kind == "image" and isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES:
            parts.append(file_markdown(dict(f, url=(images or {}).get(f.get("url"), f.get("url")))))
        elif kind in ("table", "text") and isinstance(text, str) and text.strip():
            if mime == "text/html":
                parts.append(_inert_markdown(html_table_markdown(text)))
            elif kind == "table" or mime == "text/markdown":
                parts.append(_inert_markdown(text))
            else:
                parts.append(fenced(text))
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


# --- inside Open WebUI: its own modules, when the plugin runs in its server -----------------

# The largest image copied into Open WebUI's file store; a larger one keeps sandrun's link.
MAX_KEPT_IMAGE_BYTES = 8 * 1024 * 1024
IMAGE_FETCH_TIMEOUT_S = 15


def open_webui_module(name: str) -> Any:
    """One of Open WebUI's modules (e.g. "open_webui.models.chats"), or None outside it."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


async def resolved(value: Any) -> Any:
    """Open WebUI's model functions are coroutines since 0.10 and plain functions before."""
    return await value if inspect.isawaitable(value) else value


def _fetch_image(url: str, sha256: str) -> Optional[tuple]:
    """(bytes, mime) of a raster image behind a sandrun link, or None: not a raster image,
    over MAX_KEPT_IMAGE_BYTES, not the bytes sandrun announced, or not reachable. Only an
    http(s) link is fetched (never file: or ftp:), and no redirect is followed."""
    if not url.lower().startswith(("http://", "https://")):
        return None
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "sandrun-openwebui/1.0"})
        opener = urllib.request.build_opener(_NoRedirect())
        with opener.open(request, timeout=IMAGE_FETCH_TIMEOUT_S) as response:
            mime = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            data = response.read(MAX_KEPT_IMAGE_BYTES + 1)
    except Exception:
        return None
    if mime not in RASTER_IMAGE_TYPES or len(data) > MAX_KEPT_IMAGE_BYTES:
        return None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256.lower():
        return None
    return data, mime


async def keep_image(file: dict, request: Any, user: Optional[dict], where: dict) -> str:
    """The URL to show a raster image with. Inside Open WebUI (a request and a user), the image
    is stored in Open WebUI's own file store under that user, linked to the chat message in
    `where` ({chat_id, message_id}), by the function Open WebUI's code interpreter uses for its
    images (utils/files.py get_image_url_from_base64): the chat keeps it after sandrun's
    expiring link is gone. Anywhere else, or if storing fails, sandrun's signed link."""
    url = file.get("url") or ""
    if request is None or not (user or {}).get("id") or file.get("mime") not in RASTER_IMAGE_TYPES:
        return url
    files_module = open_webui_module("open_webui.utils.files")
    users_module = open_webui_module("open_webui.models.users")
    store = getattr(files_module, "get_image_url_from_base64", None)
    users = getattr(users_module, "Users", None)
    if store is None or users is None or not url:
        return url
    fetched = await asyncio.to_thread(_fetch_image, url, str(file.get("sha256") or ""))
    if fetched is None:
        return url
    data, mime = fetched
    try:
        owner = await resolved(users.get_user_by_id(str(user["id"])))
        if owner is None:
            return url
        uri = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        kept = await resolved(store(request, uri, dict(where), owner))
    except Exception:
        return url
    return kept if isinstance(kept, str) and kept else url


async def kept_images(result: dict, request: Any, user: Optional[dict], where: dict) -> dict:
    """sandrun link -> URL to show, for every raster image of the run (files and displays)."""
    images = {}
    for f in list(result.get("files") or []) + [
        d.get("file") for d in result.get("displays") or [] if isinstance(d, dict)
    ]:
        if isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES and f.get("url"):
            if f["url"] not in images:
                images[f["url"]] = await keep_image(f, request, user, where)
    return images


def shown_images(result: dict) -> list:
    """The raster images of a run, each once: what `displays` showed, then saved image files.
    A stateful run's shown figures are only in `displays`; they count as the run's files."""
    seen, images = set(), []
    for f in [d.get("file") for d in result.get("displays") or [] if isinstance(d, dict)] + list(
        result.get("files") or []
    ):
        if isinstance(f, dict) and f.get("mime") in RASTER_IMAGE_TYPES and f.get("url"):
            if f["url"] not in seen:
                seen.add(f["url"])
                images.append(f)
    return images


async def saved_message(chat_id: str, message_id: str) -> Optional[dict]:
    """The chat message as Open WebUI has saved it (models/chats.py), or None outside Open
    WebUI. Open WebUI 0.10 keeps an answer's parts in its `output` items; earlier versions
    only in `content`."""
    chats = getattr(open_webui_module("open_webui.models.chats"), "Chats", None)
    if chats is None or not chat_id or not message_id or chat_id.startswith("local:"):
        return None
    try:
        message = await resolved(chats.get_message_by_id_and_message_id(chat_id, message_id))
    except Exception:
        return None
    return message if isinstance(message, dict) else None


async def save_message_fields(chat_id: str, message_id: str, fields: dict) -> bool:
    """Merges `fields` into the saved message (Open WebUI's own upsert), so that a chat opened
    later shows them even if no browser tab saved the chat."""
    chats = getattr(open_webui_module("open_webui.models.chats"), "Chats", None)
    if chats is None or not chat_id or not message_id or chat_id.startswith("local:"):
        return False
    try:
        await resolved(
            chats.upsert_message_to_chat_by_id_and_message_id(chat_id, message_id, fields)
        )
    except Exception:
        return False
    return True


class _HtmlTable(HTMLParser):
    """The cells of an HTML table (pandas' DataFrame._repr_html_ and the like), as text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list = []
        self.notes: list = []
        self._row: Optional[list] = None
        self._cell: Optional[list] = None
        self._hidden = 0
        self._tables = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._hidden += 1
        elif tag == "table":
            self._tables += 1
        elif tag == "tr" and self._tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._hidden = max(0, self._hidden - 1)
        elif tag == "table":
            self._tables = max(0, self._tables - 1)
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._hidden:
            return
        if self._cell is not None:
            self._cell.append(data)
        elif not self._tables and data.strip():
            self.notes.append(" ".join(data.split()))


def html_table_markdown(text: str, max_rows: int = 60, max_cols: int = 30) -> str:
    """An HTML table as a Markdown table (first row as the header), with any text around it
    (pandas' "N rows × M columns") after; HTML without a table as its text. Never HTML."""
    reader = _HtmlTable()
    try:
        reader.feed(text)
        reader.close()
    except Exception:
        return " ".join(text.split())
    rows = [[c[:200].replace("|", "\\|") for c in r[:max_cols]] for r in reader.rows]
    if not rows:
        return " ".join(reader.notes)
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1 : max_rows + 1]]
    if len(rows) > max_rows + 1:
        lines.append(f"({len(rows) - 1 - max_rows} more rows not shown)")
    return "\n".join(lines + ([""] + reader.notes if reader.notes else []))

def _table_rows(markdown: str) -> list:
    """The rows of a Markdown table (cells as text), its separator row left out."""
    rows = []
    for line in markdown.strip().splitlines():
        s = line.strip()
        if not (s.startswith("|") and s.endswith("|") and len(s) > 1):
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s[1:-1])]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c) and any(cells):
            continue
        rows.append(cells)
    return rows


def _same_value(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _line_is_row(line: str, cells: list) -> bool:
    want, got = " ".join(cells).split(), line.split()
    return len(want) == len(got) and all(map(_same_value, got, want))


def without_shown_tables(text: str, result: dict, search_lines: int = 5000) -> str:
    """`text` (printed output) without the text form of each table `displays` shows: a
    notebook's trailing DataFrame is printed as text and shown as a table; it is shown once,
    as the table. Only an exact match of every row (numbers compared as numbers, so 12.50 is
    12.5) is taken out; a table printed differently (cut, wrapped) stays."""
    tables = []
    for d in result.get("displays") or []:
        if isinstance(d, dict) and d.get("kind") == "table" and isinstance(d.get("text"), str):
            markdown = d["text"]
            if d.get("mime") == "text/html":
                markdown = html_table_markdown(markdown)
            tables.append(_table_rows(markdown))
    lines = text.split("\n")
    for rows in tables:
        n = len(rows)
        if n < 2 or n > len(lines):
            continue
        for start in range(len(lines) - n, max(-1, len(lines) - n - search_lines), -1):
            if all(_line_is_row(lines[start + i], rows[i]) for i in range(n)):
                del lines[start : start + n]
                break
    return "\n".join(lines)


# --- streamed runs: the output so far, shown while the run goes on ---------------------------

# How often, at most, the output of a streamed run is shown again while it runs (seconds).
PROGRESS_INTERVAL_S = 1.0
STREAM_TYPE = "application/x-ndjson"


class LiveOutput:
    """What a streamed run (POST /run with Accept: application/x-ndjson) has printed so far,
    per step, from its events. The thread that reads the stream adds to it; the event loop
    takes snapshots. `stopped` is set by the event loop when it gives up on the run: the
    reader then closes the stream, which ends the run on the server."""

    def __init__(self):
        self._lock = threading.Lock()
        self._steps: list = []
        self.stopped = False

    def add(self, event: dict) -> None:
        kind, index = event.get("event"), event.get("index")
        with self._lock:
            if kind == "step":
                self._steps.append({"index": index if _is_index(index) else len(self._steps),
                                    "language": str(event.get("language") or ""),
                                    "stdout": "", "stderr": "", "status": None})
            elif kind in ("stdout", "stderr") and isinstance(event.get("text"), str):
                self._step(index)[kind] += event["text"]
            elif kind == "step_end":
                self._step(index)["status"] = str(event.get("status") or "")

    def _step(self, index: Any) -> dict:
        for step in reversed(self._steps):
            if step["index"] == index:
                return step
        # Output of a step whose start was not announced: a step of its own.
        self._steps.append({"index": index if _is_index(index) else len(self._steps),
                            "language": "", "stdout": "", "stderr": "", "status": None})
        return self._steps[-1]

    def snapshot(self) -> list:
        """The steps so far, in order: {index, language, stdout, stderr, status (None while
        the step runs)}, copies."""
        with self._lock:
            return [dict(step) for step in self._steps]


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**6


def _stream_broke(base_url: str, why: str) -> Unreachable:
    return Unreachable(
        f"The connection to sandrun at {service_base(base_url)} broke off during the run "
        f"({why}), so its result never came; the run was stopped. Run it again."
    )


def read_stream(response: Any, live: LiveOutput, base_url: str, headers: dict) -> Reply:
    """The events of a streamed run, one JSON object a line, from `response` (anything with
    readline()) into `live`; the Reply of its last event: `result` (the plain answer, HTTP
    200) or `error` (as an error body). Raises Unreachable when the stream ends before that."""
    while True:
        try:
            line = response.readline()
        except (socket.timeout, TimeoutError):
            raise _stream_broke(base_url, "sandrun sent nothing for too long")
        except (OSError, ValueError, http.client.HTTPException) as e:
            raise _stream_broke(base_url, str(e) or type(e).__name__)
        if live.stopped:
            raise Unreachable("The run was stopped.")
        if not line:
            raise _stream_broke(base_url, "the stream ended early")
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            raise _stream_broke(base_url, "a line of the stream was cut or is not JSON")
        if not isinstance(event, dict):
            continue
        if event.get("event") == "result" and isinstance(event.get("result"), dict):
            return Reply(200, event["result"], json.dumps(event["result"]), headers)
        if event.get("event") == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            return Reply(500, {"error": error}, json.dumps({"error": error}), headers)
        live.add(event)


class LiveEntries:
    """Emits events (code execution entries) only when one differs from the last emitted with
    its id: the chat is not told again what it shows already."""

    def __init__(self, emitter: Optional[Callable[[dict], Awaitable[Any]]]):
        self.emitter = emitter
        self.shown: dict = {}

    async def show(self, events: list) -> None:
        for event in events:
            key = (event.get("data") or {}).get("id")
            if self.shown.get(key) != event:
                self.shown[key] = json.loads(json.dumps(event))
                await emit(self.emitter, event)


def live_output_text(step: dict, limit: int) -> str:
    """The output so far of a streamed step, as its code execution entry shows output: stdout,
    then stderr under a "[stderr]" line; each cut in the middle when longer than `limit`."""
    text = clip(step.get("stdout") or "", limit)
    if step.get("stderr"):
        if text and not text.endswith("\n"):
            text += "\n"
        text += "[stderr]\n" + clip(step["stderr"], limit)
    return text


# --- sandrun client: end --------------------------------------------------------------------


# The workspace listing behind list_files: regular files, without the directories sandrun
# ignores when exporting (DESIGN.md §4), biggest first, bounded.
LIST_FILES_COMMAND = r"""
find . \( -path ./.sandrun -o -path ./.cache -o -path ./.local -o -path ./.config \
  -o -path ./.npm -o -name __pycache__ -o -name .ipynb_checkpoints \) -prune \
  -o -type f -printf '%s\t%P\n' | sort -rn | head -n 200
"""


def _identity(user: Optional[dict], chat_id: Optional[str], metadata: Optional[dict]) -> dict:
    """`user` and `session` for the request: the Open WebUI user and the chat, so that the
    model's successive calls in one chat share one workspace."""
    fields = {}
    if (user or {}).get("id"):
        fields["user"] = str(user["id"])
    chat = chat_id or (metadata or {}).get("chat_id") or ""
    if chat:
        fields["session"] = str(chat)
    return fields


def _tool_identity(valves: Any, user: Optional[dict], chat_id: Optional[str],
                   metadata: Optional[dict]) -> dict:
    """_identity, unless the `session` valve names one session for every chat: then that
    session, and no user (the token's bound user is the caller)."""
    if getattr(valves, "session", ""):
        return {"session": valves.session}
    return _identity(user, chat_id, metadata)


def _model_text(result: dict, limit: int, images: Optional[dict] = None,
                shown_to_user: bool = False) -> str:
    """The run, compact, for the model to read: status, streams, what the program showed
    (tables as Markdown, never HTML), files as markdown. `images` maps sandrun links to the
    URLs the chat shows; `shown_to_user`: the images are under the answer already."""
    images = images or {}
    status = result.get("status")
    kernel = result.get("kernel") or {}
    if kernel:
        how = "ended by this cell" if kernel.get("ended") else kernel.get("status")
        ended = f"kernel {how}, cell {kernel.get('execution_count')}"
    elif result.get("exit_code") is not None:
        ended = f"exit code {result['exit_code']}"
    elif result.get("signal"):
        ended = f"signal {result['signal']} {signal_name(result['signal'])}"
    else:
        ended = "no exit code"
    took = seconds((result.get("usage") or {}).get("wall_ms"))
    lines = [f"status: {status} ({ended}, {took})"]
    if status != "ok":
        lines.append(outcome_sentence(result))
    if kernel.get("ended"):
        lines.append(
            "The kernel was ended: the variables of earlier calls are gone, and the next call "
            "starts a new kernel (the chat's files are kept)."
        )
    for name in ("stdout", "stderr"):
        text = result.get(name) or ""
        if name == "stdout":  # a table `displays` shows is not repeated as text
            text = without_shown_tables(text, result)
        if not text:
            lines.append(f"{name}: (empty)")
            continue
        kept = "the start kept" if kernel else "head and tail kept"
        cut = f" (cut by sandrun: {kept})" if result.get(name + "_truncated") else ""
        lines.append(f"{name}{cut}:")
        lines.append(fenced(clip(text, limit)))
    displays = displays_markdown(result, images)
    if displays:
        lines.append(
            "shown by the program, in order ("
            + (
                "the charts are already shown to the user under your answer: do not repeat "
                "them; show the tables as given"
                if shown_to_user
                else "show these charts and tables to the user by copying these lines exactly"
            )
            + "):"
        )
        lines.extend(displays)
    shown = displayed_urls(result)
    files = [f for f in result.get("files") or [] if f.get("url") not in shown]
    pictures = [f for f in files if f.get("mime") in RASTER_IMAGE_TYPES]
    others = [f for f in files if f.get("mime") not in RASTER_IMAGE_TYPES]
    if pictures:
        lines.append(
            "images saved ("
            + (
                "already shown to the user under your answer: do not repeat them"
                if shown_to_user
                else "show them to the user by copying these lines exactly"
            )
            + "):"
        )
        lines.extend(file_markdown(dict(f, url=images.get(f["url"], f["url"]))) for f in pictures)
    if others:
        lines.append("files (give them to the user by copying these lines exactly):")
        lines.extend(file_markdown(f) for f in others)
    skipped = skipped_files_line(result)
    if skipped:
        lines.append(skipped)
    return "\n".join(lines)


# Added to the name of the call's code execution entry while it runs.
RUNNING = " · running…"


class Tools:
    class Valves(BaseModel):
        service_url: str = Field(
            default="http://127.0.0.1:8080",
            description="sandrun's address as Open WebUI's server reaches it (nginx in front of "
            "sandrund), e.g. http://127.0.0.1:8080 (same host) or http://host.docker.internal:8081",
        )
        token: str = Field(
            default="",
            description="Bearer token from sandrun's tokens_file",
            json_schema_extra={"input": {"type": "password"}},
        )
        wall_time_s: int = Field(
            default=30,
            description="Time limit of a run in seconds (wall-clock and CPU); 0 = the server's "
            "default. Changing it keeps the chat's kernel (each call has its own limit)",
        )
        memory_mb: int = Field(
            default=0,
            description="Memory limit of a run in MiB; 0 = the server's default. Changing it "
            "starts a new kernel in a stateful chat (the variables are lost, files kept)",
        )
        network: bool = Field(
            default=False,
            description="Ask for outbound network access (the server may refuse); switching "
            "it in a stateful chat starts a new kernel (the variables are lost, files kept)",
        )
        packages: str = Field(
            default="",
            description="Python packages every run can import, comma-separated (e.g. "
            "\"yfinance, pandas>=2\"): the server installs them once into a prepared "
            "environment and reuses it. Calls with packages run as fresh programs (not in a "
            "kernel): setting it ends the chat's kernel (the variables are lost, files kept)",
        )
        stateful: bool = Field(
            default=True,
            description="Run the chat's code in one live Python interpreter (a Jupyter kernel) "
            "so that variables, imports and loaded data carry over between calls; off = every "
            "call is a fresh program (files still carry over), and the chat's kernel ends at "
            "the next call",
        )
        session: str = Field(
            default="",
            description="One sandrun session for every chat instead of one per chat; "
            "\"jupyter\" is the workspace of Open WebUI's Code Interpreter when sandrun is its "
            "Jupyter server: give this Tool the Code Interpreter's token (bound to a user) and "
            "it sees and adds to those files. The calls then act as the token's user, not as "
            "each Open WebUI user",
        )
        max_output_chars: int = Field(
            default=4000,
            description="Longest stdout or stderr handed to the model; the middle of longer "
            "output is cut",
        )

    def __init__(self):
        self.valves = self.Valves()

    async def run_python(
        self,
        code: str,
        __user__: Optional[dict] = None,
        __chat_id__: Optional[str] = None,
        __metadata__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __request__: Any = None,
    ) -> str:
        """
        Run a Python 3 program in an isolated sandbox and return its status, printed output
        and download links for the files it saved. Use it to compute, analyse data, make
        charts or files (CSV, XLSX, PNG) and to check that code works, instead of guessing
        results. numpy, pandas, matplotlib, scipy, openpyxl and pillow are installed; there is
        no internet access. Print what you need: only printed output and saved files come back.
        Save files in the current directory; files from earlier calls in this chat are still
        there. Variables, imports and data from earlier run_python calls in this chat are
        usually still defined, as in a notebook (the answer says "kernel restarted" when they
        are not). A chart shown with plt.show() (or a figure left open) comes back as an image,
        and the value of the last line, if it is an expression (a DataFrame, a path), is shown
        as in a notebook. Tables come back as Markdown: show them as given. Charts and images
        are shown to the user under your answer (the result says so); give each other file as
        [name](url), copying the url exactly.
        :param code: The complete Python program to run.
        """
        return await _run(
            self.valves, "python", code,
            _tool_identity(self.valves, __user__, __chat_id__, __metadata__),
            __event_emitter__, _Host(__request__, __user__, __metadata__),
        )

    async def run_bash(
        self,
        command: str,
        __user__: Optional[dict] = None,
        __chat_id__: Optional[str] = None,
        __metadata__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __request__: Any = None,
    ) -> str:
        """
        Run a Bash script in the same sandbox workspace as run_python and return its status,
        output and download links for new files: for shell commands, `pip install` of a
        package, unzipping, listing or converting files. There is no internet access.
        :param command: The Bash commands to run, one per line.
        """
        return await _run(
            self.valves, "bash", command,
            _tool_identity(self.valves, __user__, __chat_id__, __metadata__),
            __event_emitter__, _Host(__request__, __user__, __metadata__),
        )

    async def list_files(
        self,
        __user__: Optional[dict] = None,
        __chat_id__: Optional[str] = None,
        __metadata__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[Any]]] = None,
        __request__: Any = None,
    ) -> str:
        """
        List the files in this chat's sandbox workspace (size in bytes and path), for example
        to find a file saved by an earlier run. Read a file with run_python or run_bash.
        """
        identity = _tool_identity(self.valves, __user__, __chat_id__, __metadata__)
        if "session" not in identity:
            return "There is no chat workspace here: files are kept only within a chat."
        return await _run(
            self.valves, "bash", LIST_FILES_COMMAND, identity, __event_emitter__,
            _Host(__request__, __user__, __metadata__),
        )


class _Host:
    """What Open WebUI gives a tool call about where it runs: the request, the user and the
    chat message the call belongs to (for storing images in Open WebUI and saving the message)."""

    def __init__(self, request: Any, user: Optional[dict], metadata: Optional[dict]):
        self.request = request
        self.user = user
        self.chat_id = str((metadata or {}).get("chat_id") or "")
        self.message_id = str((metadata or {}).get("message_id") or "")


async def _show_images(emitter, host: "_Host", images: list) -> bool:
    """The run's images under the answer, whatever the model writes: Open WebUI's `files`
    event, which its server adds to the saved message's `files` and its page shows (images
    inline) above the answer. The page replaces the message's files with the event's list, so
    the event carries the files of earlier calls too, and the saved list is set to the same."""
    if emitter is None or not images:
        return False
    new = [{"type": "image", "url": f["url"], "name": f["name"]} for f in images]
    saved = await saved_message(host.chat_id, host.message_id)
    earlier = [f for f in (saved or {}).get("files") or [] if isinstance(f, dict)]
    urls = {f["url"] for f in new}
    files = [f for f in earlier if f.get("url") not in urls] + new
    await emitter({"type": "files", "data": {"files": files}})
    if saved is not None:
        await save_message_fields(host.chat_id, host.message_id, {"files": files})
    return True


async def _save_entry(host: "_Host", entry: dict) -> None:
    """The code execution entry in the saved answer too (Open WebUI's server keeps none of a
    `source` event with a type; only the page's save would), so a closed tab loses nothing."""
    saved = await saved_message(host.chat_id, host.message_id)
    if saved is None:
        return
    entries = [e for e in saved.get("code_executions") or []
               if isinstance(e, dict) and e.get("id") != entry.get("id")]
    await save_message_fields(host.chat_id, host.message_id,
                              {"code_executions": entries + [entry]})


async def _run(valves: Any, language: str, code: str, identity: dict, emitter,
               host: Optional[_Host] = None) -> str:
    """One POST /run of `code`; returns the text the model reads, never raises."""
    payload = {"language": language, "code": code, **identity}
    limits = limits_payload(valves.wall_time_s, valves.memory_mb)
    if limits:
        payload["limits"] = limits
    if valves.network:
        payload["network"] = True
    if packages_list(valves.packages):
        payload["packages"] = packages_list(valves.packages)
    # (A prepared environment is not mounted in a kernel: with the 'packages' valve the
    # tools run stateless.)
    # All tools of a chat go to its kernel (bash as a %%bash cell): a stateless run of the
    # session would end the kernel, since it changes the kernel's files.
    if getattr(valves, "stateful", False) and "session" in identity and "packages" not in payload:
        payload["stateful"] = True
    run_id = "sandrun-" + uuid.uuid4().hex[:12]
    name = "Python" if language == "python" else "Bash"
    # The environment of the 'packages' valve is built on the first run that asks for it.
    starting = "Installing packages…" if "packages" in payload else f"Running {name} in sandrun…"
    await emit(emitter, status_event(starting, False))
    await emit(emitter, code_execution_event(run_id, name, language, code, None))
    # While it runs, the entry shows its output so far (the run is streamed).
    live = LiveEntries(emitter)

    async def progress(steps: list) -> None:
        shown = "\n".join(x for x in (live_output_text(s, valves.max_output_chars)
                                      for s in steps) if x)
        if shown:
            result = {"output": shown, "error": "", "files": []}
            await live.show([code_execution_event(run_id, name + RUNNING, language, code,
                                                  result)])

    try:
        reply = await call_sandrun(
            valves.service_url, valves.token, payload, http_timeout(valves.wall_time_s),
            progress,
        )
    except Unreachable as e:
        reply, sentence = None, str(e)
    else:
        ok = reply.status == 200 and isinstance(reply.body, dict) and "status" in reply.body
        sentence = "" if ok else failure_sentence(reply, valves.service_url)
    if sentence:
        failed = {"output": "", "error": sentence, "files": []}
        await emit(emitter, code_execution_event(run_id, name, language, code, failed))
        await emit(emitter, status_event(sentence, True))
        return "sandrun could not run the code: " + sentence

    result = reply.body
    host = host or _Host(None, None, None)
    where = {"chat_id": host.chat_id, "message_id": host.message_id}
    images = await kept_images(result, host.request, host.user, where)
    pictures = [
        {"name": f.get("name") or f.get("path"), "url": images.get(f["url"], f["url"])}
        for f in shown_images(result)
    ]
    limit = valves.max_output_chars
    ok = result.get("status") == "ok"
    stdout = without_shown_tables(result.get("stdout") or "", result)
    stderr = result.get("stderr") or ""
    error = "" if ok else "\n".join(x for x in (clip(stderr, limit), outcome_sentence(result)) if x)
    shown = {
        "output": clip(stdout, limit) or ("(no output)" if ok else ""),
        "error": error,
        # Shown figures (a kernel's are only in `displays`) with the saved files.
        "files": pictures + [
            {"name": f.get("name") or f.get("path"), "url": f.get("url")}
            for f in result.get("files") or []
            if f.get("mime") not in RASTER_IMAGE_TYPES
        ],
    }
    entry = code_execution_event(run_id, name, language, code, shown)
    await emit(emitter, entry)
    await _save_entry(host, entry["data"])
    shown_to_user = await _show_images(emitter, host, pictures)
    await emit(emitter, status_event(outcome_sentence(result), True))
    return _model_text(result, limit, images, shown_to_user)
